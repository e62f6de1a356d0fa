//! The fixture the suites on one core share: HTTP servers of several deployments over one
//! Triton core, each known by the name its checks use.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use trident::config::Config;
use trident::engine::triton::TritonEngine;
use trident::http::AppState;

/// Servers over one core. The runtime is dropped first, so the servers stop before the core.
pub struct Servers {
    /// Runs the servers.
    pub runtime: tokio::runtime::Runtime,
    /// The core they share.
    pub engine: TritonEngine,
    addresses: HashMap<&'static str, SocketAddr>,
}

impl Servers {
    /// No server yet, over `engine`.
    pub fn new(engine: TritonEngine) -> Servers {
        Servers {
            runtime: super::runtime(),
            engine,
            addresses: HashMap::new(),
        }
    }

    /// Serves `config` on the core as `name`.
    pub fn add(&mut self, name: &'static str, config: Config) -> SocketAddr {
        let state = AppState::new(self.engine.clone(), config);
        self.add_state(name, Arc::new(state))
    }

    /// Serves `state` as `name` (a state prepared beyond its configuration: plugins, sessions).
    pub fn add_state(
        &mut self,
        name: &'static str,
        state: Arc<AppState<TritonEngine>>,
    ) -> SocketAddr {
        let address = super::serve(&self.runtime, state);
        self.addresses.insert(name, address);
        address
    }

    /// The address of the server named `name`.
    pub fn at(&self, name: &str) -> SocketAddr {
        self.addresses[name]
    }
}
