//! The route table of the HTTP listener. [`Routes`] puts each route on an
//! axum [`Router`] and writes down its `(method, path)` as it does, so the
//! list of what the listener serves ([`super::route_table`]) comes from the
//! very calls that serve it; axum's `Router` cannot list its routes.
//! `tests/it/openapi_doc.rs` holds `/openapi.json` to that list.
//!
//! [`get`], [`post`], [`put`] and [`delete`] stand in for the functions of
//! `axum::routing` of those names, and chain the same way
//! (`get(list).post(create)`), keeping the methods they were given.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter};
use axum::Router;

/// The handlers of one path, by method, and the methods they answer.
pub struct Methods<S> {
    methods: Vec<Method>,
    router: MethodRouter<S>,
}

/// `GET` to `handler` (axum answers `HEAD` with it too, as ever).
pub fn get<H, T, S>(handler: H) -> Methods<S>
where
    H: Handler<T, S>,
    T: 'static,
    S: Clone + Send + Sync + 'static,
{
    Methods::new().get(handler)
}

/// `POST` to `handler`.
pub fn post<H, T, S>(handler: H) -> Methods<S>
where
    H: Handler<T, S>,
    T: 'static,
    S: Clone + Send + Sync + 'static,
{
    Methods::new().post(handler)
}

/// `PUT` to `handler`.
pub fn put<H, T, S>(handler: H) -> Methods<S>
where
    H: Handler<T, S>,
    T: 'static,
    S: Clone + Send + Sync + 'static,
{
    Methods::new().put(handler)
}

/// `DELETE` to `handler`.
pub fn delete<H, T, S>(handler: H) -> Methods<S>
where
    H: Handler<T, S>,
    T: 'static,
    S: Clone + Send + Sync + 'static,
{
    Methods::new().delete(handler)
}

impl<S> Methods<S>
where
    S: Clone + Send + Sync + 'static,
{
    fn new() -> Methods<S> {
        Methods { methods: Vec::new(), router: MethodRouter::new() }
    }

    #[track_caller]
    fn on<H, T>(mut self, method: Method, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone()).expect("a method axum routes");
        self.router = self.router.on(filter, handler);
        self.methods.push(method);
        self
    }

    #[track_caller]
    pub fn get<H: Handler<T, S>, T: 'static>(self, handler: H) -> Self {
        self.on(Method::GET, handler)
    }

    #[track_caller]
    pub fn post<H: Handler<T, S>, T: 'static>(self, handler: H) -> Self {
        self.on(Method::POST, handler)
    }

    #[track_caller]
    pub fn put<H: Handler<T, S>, T: 'static>(self, handler: H) -> Self {
        self.on(Method::PUT, handler)
    }

    #[track_caller]
    pub fn delete<H: Handler<T, S>, T: 'static>(self, handler: H) -> Self {
        self.on(Method::DELETE, handler)
    }

    /// The handler of every other method of the path. Not in the table: it
    /// answers what the path does not serve (`/mcp`'s 405, for one).
    pub fn fallback<H: Handler<T, S>, T: 'static>(mut self, handler: H) -> Self {
        self.router = self.router.fallback(handler);
        self
    }

    /// The handlers' own state, given when there is one. Without it (only
    /// the table is being built, [`super::route_table`]) the methods stay
    /// and the handlers go: the path is in the table, and answers nothing.
    pub fn with_state_if<S2: Clone>(self, state: Option<S>) -> Methods<S2> {
        let router = match state {
            Some(state) => self.router.with_state(state),
            None => MethodRouter::new(),
        };
        Methods { methods: self.methods, router }
    }
}

/// Routes, and the table of what they serve: `(method, path template)` in
/// the order they were routed.
pub struct Routes<S> {
    router: Router<S>,
    table: Vec<(Method, &'static str)>,
}

impl<S> Default for Routes<S>
where
    S: Clone + Send + Sync + 'static,
{
    fn default() -> Self {
        Routes::new()
    }
}

impl<S> Routes<S>
where
    S: Clone + Send + Sync + 'static,
{
    pub fn new() -> Routes<S> {
        Routes { router: Router::new(), table: Vec::new() }
    }

    /// `Router::route`, writing down each method of `methods` at `path`.
    #[track_caller]
    pub fn route(mut self, path: &'static str, methods: Methods<S>) -> Self {
        self.table.extend(methods.methods.into_iter().map(|m| (m, path)));
        self.router = self.router.route(path, methods.router);
        self
    }

    /// `Router::merge`, the tables one after the other.
    #[track_caller]
    pub fn merge(mut self, other: Routes<S>) -> Self {
        self.router = self.router.merge(other.router);
        self.table.extend(other.table);
        self
    }

    pub fn table(&self) -> &[(Method, &'static str)] {
        &self.table
    }

    pub fn into_router(self) -> Router<S> {
        self.router
    }
}
