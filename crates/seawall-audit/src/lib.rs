//! seawall-audit (being built).
