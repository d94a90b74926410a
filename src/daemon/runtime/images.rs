//! Image store (pull, import, content-addressed layers).
