//! Triton's generate extension (filled in below).
