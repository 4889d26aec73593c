//! What a program embedding the runtime adds to it. `tickwire serve` adds the persistence
//! API and the web client's files; a game studio's binary adds its own routes.

use std::sync::Arc;

use axum::Router;

/// Appends Prometheus text-format lines to a `/metrics` answer.
pub(super) type MetricsWriter = Arc<dyn Fn(&mut String) + Send + Sync>;

/// Routes served beside the runtime's own on the HTTP and HTTPS ports, and metrics appended
/// to `/metrics`.
///
/// ```
/// use axum::{Router, routing::get};
/// use tickwire_server::runtime::Extras;
///
/// let extras = Extras::default()
///     .routes(Router::new().route("/api/motd", get(|| async { "welcome" })))
///     .metrics(|text: &mut String| text.push_str("# TYPE motd_reads counter\nmotd_reads 0\n"));
/// ```
#[derive(Default)]
pub struct Extras {
    pub(super) routes: Router,
    pub(super) metrics: Vec<MetricsWriter>,
}

impl Extras {
    /// Adds `routes`. Their paths must not collide with the runtime's (`/api/matchmake`,
    /// `/api/rooms`, `/api/admin/…`, `/ws`, `/healthz`, `/readyz`, `/metrics`): merging
    /// overlapping routes panics in [`Runtime::start_with`](super::Runtime::start_with).
    pub fn routes(mut self, routes: Router) -> Self {
        self.routes = self.routes.merge(routes);
        self
    }

    /// Adds a writer of Prometheus text-format lines, called on every `/metrics` request.
    pub fn metrics(mut self, write: impl Fn(&mut String) + Send + Sync + 'static) -> Self {
        self.metrics.push(Arc::new(write));
        self
    }
}

impl std::fmt::Debug for Extras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extras")
            .field("metrics", &self.metrics.len())
            .finish_non_exhaustive()
    }
}
