//! A relay server in the test process, every listener on a free loopback port.

use tickwire_server::config::ServeConfig;
use tickwire_server::embed::free_ports_config;
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};

/// Relay rooms of 16 seats on one shard; `configure` changes anything else and may add room
/// kinds. Returns the runtime and its `http://` address.
pub(crate) async fn relay_server(
    configure: impl FnOnce(&mut ServeConfig, &mut RoomKinds),
) -> (Runtime, String) {
    let mut config = free_ports_config();
    config.shards = 1;
    config.console.enabled = false;
    config.admin.token = "client-test-token".into();
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    configure(&mut config, &mut kinds);
    let runtime = Runtime::start(config, kinds).await.unwrap();
    let url = format!("http://{}", runtime.addresses().http);
    (runtime, url)
}
