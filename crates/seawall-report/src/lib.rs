//! seawall-report (being built).
