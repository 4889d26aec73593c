//! What a program embedding the runtime adds to it. `tickwire serve` adds the persistence
//! API and the web client's files; a game studio's binary adds its own routes.

use std::sync::Arc;

use axum::Router;

/// Appends Prometheus text-format lines to a `/metrics` answer.
pub(super) type MetricsWriter = Arc<dyn Fn(&mut String) + Send + Sync>;

/// A degraded part's one-line note for `/readyz`, `None` while it is well.
pub(super) type ReadinessNote = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Bytes a part holds from the allocator outside the Rust heap's count.
pub(super) type MemoryOutsideHeap = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Routes served beside the runtime's own on the HTTP and HTTPS ports or on the operator
/// listener, metrics appended to `/metrics`, and notes appended to `/readyz`.
///
/// ```
/// use axum::{Router, routing::get};
/// use tickwire_server::runtime::Extras;
///
/// let extras = Extras::default()
///     .routes(Router::new().route("/api/motd", get(|| async { "welcome" })))
///     .metrics(|text: &mut String| text.push_str("# TYPE motd_reads counter\nmotd_reads 0\n"))
///     .readiness(|| None::<String>);
/// ```
#[derive(Default)]
pub struct Extras {
    pub(super) routes: Router,
    pub(super) operator_routes: Router,
    pub(super) metrics: Vec<MetricsWriter>,
    pub(super) readiness: Vec<ReadinessNote>,
    pub(super) memory_outside_heap: Vec<MemoryOutsideHeap>,
}

impl Extras {
    /// Adds `routes`. Their paths must not collide with the runtime's (`/api/matchmake`,
    /// `/api/rooms`, `/api/admin/…`, `/ws`, `/healthz`, `/readyz`, `/metrics`): merging
    /// overlapping routes panics in [`Runtime::start_with`](super::Runtime::start_with).
    pub fn routes(mut self, routes: Router) -> Self {
        self.routes = self.routes.merge(routes);
        self
    }

    /// Adds routes for the operator, served where `/metrics` and the admin API are: on the
    /// operator listener (`admin.listen`), never on the public ports. An admin page that
    /// calls `/api/admin/*` belongs here, so it is served where that API answers. Their
    /// paths must not collide with `/metrics`, `/api/admin/…`, `/healthz` or `/readyz`.
    pub fn operator_routes(mut self, routes: Router) -> Self {
        self.operator_routes = self.operator_routes.merge(routes);
        self
    }

    /// Adds a writer of Prometheus text-format lines, called on every `/metrics` request.
    pub fn metrics(mut self, write: impl Fn(&mut String) + Send + Sync + 'static) -> Self {
        self.metrics.push(Arc::new(write));
        self
    }

    /// Adds a part whose degraded state `/readyz` reports: while `note` returns a line, the
    /// answer's body carries it after `ready`. The status stays the phase's (200 while
    /// running): a degraded part worth reporting is not necessarily one worth taking the node
    /// out of rotation for (persistence: see OPERATIONS.md, Persistence).
    pub fn readiness(mut self, note: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        self.readiness.push(Arc::new(note));
        self
    }

    /// Adds a part that allocates outside the Rust heap's count (a C library with its own
    /// `malloc` calls: `tickwire serve` adds the embedded SQLite's page cache). The memory
    /// trim counts what `bytes` returns as in use, not as free memory to hand back.
    pub fn memory_outside_heap(mut self, bytes: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.memory_outside_heap.push(Arc::new(bytes));
        self
    }
}

impl std::fmt::Debug for Extras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extras")
            .field("metrics", &self.metrics.len())
            .field("readiness", &self.readiness.len())
            .finish_non_exhaustive()
    }
}
