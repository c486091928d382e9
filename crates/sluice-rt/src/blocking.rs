//! A small shared thread pool for the blocking calls a worker must not make itself
//! (getaddrinfo for forward-proxy targets).

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

/// Threads in the pool. Name lookups are rare (the proxy caches them) and mostly wait on the
/// network, so a few threads serve all workers.
const POOL_THREADS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

fn pool() -> &'static Mutex<Sender<Job>> {
    static POOL: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (sender, receiver) = channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for n in 0..POOL_THREADS {
            let receiver: Arc<Mutex<Receiver<Job>>> = receiver.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("sluice-blocking-{n}"))
                .spawn(move || loop {
                    let job = receiver.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            if let Err(error) = spawned {
                tracing::error!(%error, "cannot start a blocking-pool thread");
            }
        }
        Mutex::new(sender)
    })
}

struct Shared<T> {
    output: Option<T>,
    waker: Option<Waker>,
}

/// Runs `f` on the blocking pool; the returned future completes with its result.
pub fn spawn_blocking<T, F>(f: F) -> BlockingTask<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let shared = Arc::new(Mutex::new(Shared {
        output: None,
        waker: None,
    }));
    let job_shared = shared.clone();
    let job: Job = Box::new(move || {
        let output = f();
        let waker = {
            let mut shared = job_shared.lock().unwrap_or_else(|p| p.into_inner());
            shared.output = Some(output);
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    });
    let sent = pool().lock().unwrap_or_else(|p| p.into_inner()).send(job);
    // The receivers live as long as the process; a send only fails if every pool thread failed
    // to start, which was logged.
    BlockingTask {
        shared,
        failed: sent.is_err(),
    }
}

/// The future of [`spawn_blocking`].
#[derive(Debug)]
pub struct BlockingTask<T> {
    shared: Arc<Mutex<Shared<T>>>,
    failed: bool,
}

impl<T> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("done", &self.output.is_some())
            .finish()
    }
}

impl<T> Future for BlockingTask<T> {
    /// `None` if the pool could not run the job.
    type Output = Option<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        match shared.output.take() {
            Some(output) => Poll::Ready(Some(output)),
            None => {
                shared.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
