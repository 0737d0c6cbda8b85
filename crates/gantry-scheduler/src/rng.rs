//! The seeded generator that breaks ties between equally scored nodes (shared with the
//! decoder, which names `generateName` objects with it).

pub use gantry_api::rng::Rng;
