//! What vets plugins before and while they serve: the manifest that names them, their
//! signatures, their golden cases, the check of the models they are routed to, shadows compared
//! with the serving adapters, and what each plugin's calls cost. It loads plugins into the
//! sandbox (the runtime room below it) and never serves a request itself.
//!
//! - [`manifest`]: the TOML manifest (digests, limits, config, which models use what);
//! - [`signing`]: ed25519 signatures of plugins, and the keys a manifest trusts;
//! - [`loading`]: a manifest's plugins read, verified, compiled once and pre-instantiated;
//!   [`plugin`]: one loaded plugin and the media types it takes and serves;
//! - [`cases`]: golden cases a plugin carries, run at every load before it serves;
//! - [`model_check`]: a plugin's check of the models it is routed to, before they are served;
//! - [`shadow`]: candidates compared with the serving adapters on sampled requests;
//!   [`variants`]: A/B variants' weights and the hash that assigns a request to one;
//! - [`accounting`]: what each plugin's calls cost, by hook (calls, CPU, memory, waits).

pub mod accounting;
pub mod cases;
pub mod loading;
pub mod manifest;
pub mod model_check;
pub mod plugin;
pub mod shadow;
pub mod signing;
pub mod variants;
