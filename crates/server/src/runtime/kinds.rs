//! The room kinds a server hosts: a name, a default capacity and a factory.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::room::Room;

type Factory = Arc<dyn Fn() -> Box<dyn Room> + Send + Sync>;

#[derive(Clone)]
struct Kind {
    capacity: u16,
    factory: Factory,
}

/// The room kinds matchmaking may create, by name.
///
/// ```
/// use tickwire_server::rooms::relay::RelayRoom;
/// use tickwire_server::runtime::RoomKinds;
///
/// let mut kinds = RoomKinds::new();
/// kinds.register("relay", 16, || Box::new(RelayRoom::default()));
/// assert_eq!(kinds.capacity("relay"), Some(16));
/// ```
#[derive(Clone, Default)]
pub struct RoomKinds {
    kinds: BTreeMap<String, Kind>,
}

impl std::fmt::Debug for RoomKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.kinds.iter().map(|(name, kind)| (name, kind.capacity)))
            .finish()
    }
}

impl RoomKinds {
    /// No kinds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hosts rooms of `name` with `capacity` seats (configuration may override it), each
    /// made by `factory`.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        capacity: u16,
        factory: impl Fn() -> Box<dyn Room> + Send + Sync + 'static,
    ) -> &mut Self {
        self.kinds.insert(
            name.into(),
            Kind {
                capacity,
                factory: Arc::new(factory),
            },
        );
        self
    }

    /// Sets a registered kind's capacity; false if there is no such kind.
    pub fn set_capacity(&mut self, name: &str, capacity: u16) -> bool {
        match self.kinds.get_mut(name) {
            Some(kind) => {
                kind.capacity = capacity;
                true
            }
            None => false,
        }
    }

    /// A kind's capacity.
    pub fn capacity(&self, name: &str) -> Option<u16> {
        self.kinds.get(name).map(|kind| kind.capacity)
    }

    /// A new room of a kind.
    pub fn create(&self, name: &str) -> Option<Box<dyn Room>> {
        self.kinds.get(name).map(|kind| (kind.factory)())
    }

    /// Every kind with its capacity.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u16)> {
        self.kinds
            .iter()
            .map(|(name, kind)| (name.as_str(), kind.capacity))
    }
}
