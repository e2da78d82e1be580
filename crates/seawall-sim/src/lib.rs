//! seawall-sim (being built).
