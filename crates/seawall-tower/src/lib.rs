//! seawall-tower (being built).
