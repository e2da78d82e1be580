//! seawall-lab (being built).
