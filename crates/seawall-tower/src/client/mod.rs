//! Client layers (being built).
