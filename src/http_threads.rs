//! The threads that serve HTTP connections. Each is a tokio runtime of one
//! worker, with its own event loop; the listener hands each accepted
//! connection to the next thread in turn, and the connection stays there.
//!
//! Why not the main multi-thread runtime: there one worker at a time holds
//! the event loop, and it polls it only when it runs out of tasks (or every
//! few dozen tasks). While it answers the connections one poll made ready,
//! the sockets that became readable meanwhile wait, and the other worker,
//! out of tasks, sleeps on a condition variable instead of taking them. Under
//! 16 connections of point reads on two cores that left a fifth of the
//! machine idle (docs/performance.md, "Where the idle cores go"). With an
//! event loop per thread each thread picks up its own sockets as soon as it
//! is free, and the kernel runs whichever thread has work on whichever core
//! is idle; more threads than cores keep a core busy while one thread waits
//! (docs/performance.md, "An event loop per HTTP thread").
//!
//! What a request spawns (`tokio::spawn`, `spawn_blocking`) runs on its
//! connection's thread's runtime; work that must not hold the connections
//! beside it up goes to the blocking pool, as on any tokio worker.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub struct HttpThreads {
    runtimes: Vec<tokio::runtime::Runtime>,
    next: AtomicUsize,
}

/// How long, at shutdown, tasks still running on the threads (a stream the
/// drain gave up on, a task a request spawned) get before they are dropped.
const STOP_GRACE: Duration = Duration::from_secs(1);

impl HttpThreads {
    /// Starts `count` threads (at least one), named `tempora-http-<n>`.
    ///
    /// Each is a multi-thread runtime of one worker rather than a
    /// current-thread runtime: a task woken from another thread (a write
    /// answered by the writer's sync stage) costs a current-thread runtime a
    /// write to its event loop's wake-up descriptor every time, where the
    /// multi-thread scheduler only wakes a worker that is asleep. Under W1
    /// four current-thread runtimes cost 11-28 % more server CPU per assert
    /// than one shared runtime; four of one worker each cost the same.
    pub fn start(count: usize) -> std::io::Result<HttpThreads> {
        let mut runtimes = Vec::new();
        for n in 0..count.max(1) {
            runtimes.push(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .thread_name(format!("tempora-http-{n}"))
                    .build()?,
            );
        }
        Ok(HttpThreads { runtimes, next: AtomicUsize::new(0) })
    }

    /// Serves an accepted connection on the next thread: `serve` gets the
    /// socket registered with that thread's event loop.
    pub fn hand<F, Fut>(&self, tcp: tokio::net::TcpStream, serve: F) -> std::io::Result<()>
    where
        F: FnOnce(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // The socket leaves the listener's event loop for the thread's.
        let std_tcp = tcp.into_std()?;
        let n = self.next.fetch_add(1, Ordering::Relaxed) % self.runtimes.len();
        self.runtimes[n].spawn(async move {
            match tokio::net::TcpStream::from_std(std_tcp) {
                Ok(tcp) => serve(tcp).await,
                Err(e) => tracing::debug!(error = %e, "cannot register a connection with its thread"),
            }
        });
        Ok(())
    }

    /// Stops every thread: tasks still running get [`STOP_GRACE`], then are
    /// dropped. Blocks (call it off the async threads).
    pub fn stop(mut self) {
        for rt in self.runtimes.drain(..) {
            rt.shutdown_timeout(STOP_GRACE);
        }
    }
}

impl Drop for HttpThreads {
    /// Threads not stopped by [`HttpThreads::stop`] (the server gave up
    /// starting, say on a port in use) are let go without waiting: a runtime
    /// dropped the ordinary way blocks, which an async caller may not.
    fn drop(&mut self) {
        for rt in self.runtimes.drain(..) {
            rt.shutdown_background();
        }
    }
}

/// The default `http_threads`: twice the cores this process may use. With
/// one thread per core, a thread that the kernel takes off its core (for the
/// writer, a checkpoint, the search index) stalls its connections for a time
/// slice: on two cores the p99 of point reads went from under 1 ms to 4 ms.
pub fn default_count() -> usize {
    2 * std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
