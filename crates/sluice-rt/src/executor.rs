//! The single-threaded executor: tasks, wakers, and the loop that alternates between running
//! ready tasks and asking the reactor what became ready.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{eventfd, EventfdFlags};
use slab::Slab;

use crate::io::IoTable;
use crate::reactor::{Reactor, Readiness, Token};
use crate::sys::epoll::EpollReactor;
use crate::time::Timers;

/// The reactor token of each worker's eventfd, through which other threads wake its tasks.
const REMOTE_TOKEN: Token = usize::MAX;

/// How many tasks run before the reactor is asked again, so that a burst of ready tasks cannot
/// starve sockets whose readiness the kernel already reported.
const TASKS_PER_TURN: usize = 512;

/// The readiness mechanism a runtime uses, chosen at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// epoll(7), edge-triggered.
    #[default]
    Epoll,
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "epoll" => Ok(Backend::Epoll),
            other => Err(format!(
                "unknown readiness backend {other:?}, expected \"epoll\""
            )),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Epoll => "epoll",
        })
    }
}

type BoxedTask = Pin<Box<dyn Future<Output = ()>>>;

struct TaskSlot {
    /// `None` while the task is being polled, so that it may spawn others meanwhile.
    future: Option<BoxedTask>,
    waker: Waker,
}

/// What other threads share with one runtime: a queue of task ids to wake and the eventfd that
/// interrupts the reactor's wait.
struct Remote {
    queue: Mutex<Vec<usize>>,
    eventfd: OwnedFd,
    shutdown: AtomicBool,
}

impl Remote {
    fn notify(&self) {
        // An eventfd counter only saturates at 2^64-1; a failed write means it is already
        // signalled, which is all we need.
        let _ = rustix::io::write(&self.eventfd, &1u64.to_ne_bytes());
    }
}

/// Everything one worker's loop owns. Reached through the thread-local [`CONTEXT`].
pub(crate) struct Core {
    id: u64,
    reactor: RefCell<Box<dyn Reactor>>,
    tasks: RefCell<Slab<TaskSlot>>,
    ready: RefCell<VecDeque<usize>>,
    pub(crate) io: RefCell<IoTable>,
    pub(crate) timers: RefCell<Timers>,
    remote: Arc<Remote>,
    shutdown_waiters: RefCell<Vec<Waker>>,
}

thread_local! {
    static CONTEXT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
    static CURRENT_CORE: Cell<u64> = const { Cell::new(0) };
}

static NEXT_CORE_ID: AtomicU64 = AtomicU64::new(1);

/// Runs `f` with the current thread's runtime core.
///
/// # Panics
/// Outside [`Runtime::block_on`]: using a socket or timer outside a runtime is a programming
/// error, not a condition to recover from.
pub(crate) fn with_core<R>(f: impl FnOnce(&Rc<Core>) -> R) -> R {
    CONTEXT.with(|c| {
        let core = c.borrow();
        f(core
            .as_ref()
            .expect("sluice-rt used outside Runtime::block_on"))
    })
}

/// Like [`with_core`], but `None` outside a runtime (used on drop paths).
pub(crate) fn try_with_core<R>(f: impl FnOnce(&Rc<Core>) -> R) -> Option<R> {
    CONTEXT.with(|c| c.borrow().as_ref().map(f))
}

impl Core {
    pub(crate) fn reactor(&self) -> std::cell::RefMut<'_, Box<dyn Reactor>> {
        self.reactor.borrow_mut()
    }
}

struct TaskWaker {
    task: usize,
    core: u64,
    remote: Arc<Remote>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if CURRENT_CORE.with(Cell::get) == self.core {
            // Wakes from the loop's own thread (the common case) need no lock.
            try_with_core(|core| core.ready.borrow_mut().push_back(self.task));
        } else {
            self.remote
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self.task);
            self.remote.notify();
        }
    }
}

/// One worker's event loop. Create it on the thread that will run it; it is not `Send`.
pub struct Runtime {
    core: Rc<Core>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("backend", &self.core.reactor.borrow().name())
            .finish()
    }
}

impl Runtime {
    /// Creates a runtime with the given readiness backend.
    pub fn new(backend: Backend) -> io::Result<Self> {
        let mut reactor: Box<dyn Reactor> = match backend {
            Backend::Epoll => Box::new(EpollReactor::new()?),
        };
        let eventfd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        reactor.register(eventfd.as_fd(), REMOTE_TOKEN)?;
        let remote = Arc::new(Remote {
            queue: Mutex::new(Vec::new()),
            eventfd,
            shutdown: AtomicBool::new(false),
        });
        let core = Rc::new(Core {
            id: NEXT_CORE_ID.fetch_add(1, Ordering::Relaxed),
            reactor: RefCell::new(reactor),
            tasks: RefCell::new(Slab::new()),
            ready: RefCell::new(VecDeque::new()),
            io: RefCell::new(IoTable::default()),
            timers: RefCell::new(Timers::default()),
            remote,
            shutdown_waiters: RefCell::new(Vec::new()),
        });
        Ok(Self { core })
    }

    /// A handle another thread (the signal handler's) uses to ask this runtime to shut down.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            remote: self.core.remote.clone(),
        }
    }

    /// Runs `future` to completion, together with every task spawned meanwhile. Tasks still
    /// pending when it completes are dropped.
    pub fn block_on<F: Future + 'static>(&self, future: F) -> F::Output
    where
        F::Output: 'static,
    {
        CONTEXT.with(|c| *c.borrow_mut() = Some(self.core.clone()));
        CURRENT_CORE.with(|c| c.set(self.core.id));
        let main = spawn(future);
        let result = self.run_until(&main);
        // Drop the remaining tasks while the context is still set: their sockets deregister.
        let leftover: Vec<TaskSlot> = self.core.tasks.borrow_mut().drain().collect();
        drop(leftover);
        CONTEXT.with(|c| *c.borrow_mut() = None);
        CURRENT_CORE.with(|c| c.set(0));
        // A panic of the main future reaches the caller only now, after the cleanup above.
        result.unwrap_or_else(|payload| panic::resume_unwind(payload))
    }

    fn run_until<T>(&self, main: &JoinHandle<T>) -> thread::Result<T> {
        let mut events = Vec::new();
        loop {
            self.run_ready_tasks();
            if let Some(finished) = main.state.borrow_mut().output.take() {
                return finished;
            }
            let now = Instant::now();
            let timeout = if !self.core.ready.borrow().is_empty() {
                Some(Duration::ZERO)
            } else {
                self.core
                    .timers
                    .borrow()
                    .next_deadline()
                    .map(|d| d.saturating_duration_since(now))
            };
            events.clear();
            if let Err(error) = self.core.reactor.borrow_mut().wait(&mut events, timeout) {
                tracing::error!(%error, "reactor wait failed");
            }
            for readiness in &events {
                self.dispatch(readiness);
            }
            let expired = self.core.timers.borrow_mut().take_expired(Instant::now());
            expired.into_iter().for_each(Waker::wake);
        }
    }

    fn dispatch(&self, readiness: &Readiness) {
        if readiness.token == REMOTE_TOKEN {
            let mut counter = [0u8; 8];
            let _ = rustix::io::read(&self.core.remote.eventfd, &mut counter);
            let woken = std::mem::take(
                &mut *self
                    .core
                    .remote
                    .queue
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            self.core.ready.borrow_mut().extend(woken);
            if self.core.remote.shutdown.load(Ordering::Acquire) {
                let waiters = std::mem::take(&mut *self.core.shutdown_waiters.borrow_mut());
                waiters.into_iter().for_each(Waker::wake);
            }
            return;
        }
        let wakers = self.core.io.borrow_mut().set_ready(readiness);
        wakers.into_iter().flatten().for_each(Waker::wake);
    }

    fn run_ready_tasks(&self) {
        for _ in 0..TASKS_PER_TURN {
            let Some(id) = self.core.ready.borrow_mut().pop_front() else {
                return;
            };
            let taken = {
                let mut tasks = self.core.tasks.borrow_mut();
                // A stale wake (task already finished, slot maybe reused) is harmless: futures
                // tolerate spurious polls.
                tasks
                    .get_mut(id)
                    .and_then(|slot| Some((slot.future.take()?, slot.waker.clone())))
            };
            let Some((mut future, waker)) = taken else {
                continue;
            };
            let mut cx = Context::from_waker(&waker);
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(()) => {
                    self.core.tasks.borrow_mut().remove(id);
                    // Dropped outside the borrow: its destructors may touch the task table.
                    drop(future);
                }
                Poll::Pending => {
                    if let Some(slot) = self.core.tasks.borrow_mut().get_mut(id) {
                        slot.future = Some(future);
                    }
                }
            }
        }
    }
}

/// Spawns a task on the current thread's runtime. The task runs even if the handle is dropped.
///
/// A task that panics ends alone: the panic is logged, the task's state is dropped (its sockets
/// close) and the worker's other tasks go on, so one connection's bug cannot take down every
/// connection of the worker. Awaiting the [`JoinHandle`] of a panicked task resumes the panic
/// in the awaiting task; for the future given to [`Runtime::block_on`] that is the caller.
pub fn spawn<F: Future + 'static>(future: F) -> JoinHandle<F::Output>
where
    F::Output: 'static,
{
    let state = Rc::new(RefCell::new(JoinState {
        output: None,
        waiter: None,
    }));
    let task_state = state.clone();
    let task = async move {
        let mut future = std::pin::pin!(future);
        // Unwind safety: a panicked future is never polled again, and what it shared through
        // `Rc<RefCell<_>>` is released by the unwinding (RefCell does not poison).
        let output = std::future::poll_fn(|cx| {
            match panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
                Ok(Poll::Pending) => Poll::Pending,
                Err(payload) => Poll::Ready(Err(payload)),
            }
        })
        .await;
        if let Err(payload) = &output {
            tracing::error!(
                panic = panic_message(payload.as_ref()),
                "a task panicked; it is dropped and the worker goes on"
            );
        }
        let waiter = {
            let mut state = task_state.borrow_mut();
            state.output = Some(output);
            state.waiter.take()
        };
        if let Some(waker) = waiter {
            waker.wake();
        }
    };
    with_core(|core| {
        let mut tasks = core.tasks.borrow_mut();
        let entry = tasks.vacant_entry();
        let id = entry.key();
        let waker = Waker::from(Arc::new(TaskWaker {
            task: id,
            core: core.id,
            remote: core.remote.clone(),
        }));
        entry.insert(TaskSlot {
            future: Some(Box::pin(task)),
            waker,
        });
        core.ready.borrow_mut().push_back(id);
    });
    JoinHandle { state }
}

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}

struct JoinState<T> {
    /// The task's output, or its panic.
    output: Option<thread::Result<T>>,
    waiter: Option<Waker>,
}

/// Awaits a spawned task's output. Dropping it detaches the task.
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").finish_non_exhaustive()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut state = self.state.borrow_mut();
        match state.output.take() {
            Some(Ok(output)) => Poll::Ready(output),
            Some(Err(payload)) => {
                drop(state);
                panic::resume_unwind(payload)
            }
            None => {
                state.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Asks a runtime, from any thread, to shut down; tasks observe it through
/// [`ShutdownHandle::requested`] on the runtime's own thread.
#[derive(Clone)]
pub struct ShutdownHandle {
    remote: Arc<Remote>,
}

impl fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownHandle")
            .field("requested", &self.remote.shutdown.load(Ordering::Relaxed))
            .finish()
    }
}

impl ShutdownHandle {
    /// Requests shutdown; wakes every task waiting in [`ShutdownHandle::requested`].
    pub fn shutdown(&self) {
        self.remote.shutdown.store(true, Ordering::Release);
        self.remote.notify();
    }

    /// Whether shutdown was requested.
    pub fn is_requested(&self) -> bool {
        self.remote.shutdown.load(Ordering::Acquire)
    }

    /// Completes once shutdown is requested. Must be awaited on the runtime's own thread.
    pub async fn requested(&self) {
        std::future::poll_fn(|cx| {
            if self.is_requested() {
                return Poll::Ready(());
            }
            with_core(|core| {
                let mut waiters = core.shutdown_waiters.borrow_mut();
                // Polled again on every wake of a task that races it against accept: keep one
                // waker per task, not one per poll.
                if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    waiters.push(cx.waker().clone());
                }
            });
            Poll::Pending
        })
        .await;
    }
}
