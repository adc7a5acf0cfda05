//! Loading a NeuroSan agent network: the HOCON reader
//! (`tempora::agents::hocon::parse_str`, with the registry's limits) and the
//! network checks (`tempora::agents::AgentNetwork::from_value`). Includes
//! name no directory here, so an `include` is refused, not read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tempora::agents::hocon::{self, Options};
use tempora::agents::AgentNetwork;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let options = Options::default();
    let Ok(value) = hocon::parse_str(text, "fuzz.hocon", &options) else { return };
    if let Ok(network) = AgentNetwork::from_value("fuzz", "fuzz.hocon", None, &value) {
        let _ = network.connectivity();
        let _ = network.external_references();
        let _ = network.unsupported_agents();
        let _ = network.description();
        let _ = network.function();
        for agent in &network.agents {
            let _ = network.effective_llm_config(agent);
        }
    }
});
