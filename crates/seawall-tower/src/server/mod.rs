//! Server layers (being built).
