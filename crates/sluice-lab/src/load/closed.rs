//! The closed loop, the papers' s-client: each emulated client sends one request, waits for
//! the whole response, and at once sends the next (on a new connection unless keep-alive).

use std::rc::Rc;
use std::time::Instant;

use super::client::Failure;
use super::thread::{Finished, LiveGuard, ThreadContext};
use super::workload::plan_closed;
use super::{ConnectionMode, Pattern};

/// One emulated client, until the run stops or runs out of requests.
pub async fn client(ctx: Rc<ThreadContext>, _live: LiveGuard) {
    let Pattern::Closed {
        mix,
        sizes,
        connection,
        ..
    } = ctx.config.pattern
    else {
        return;
    };
    let keep_alive = connection == ConnectionMode::KeepAlive;
    let mut conn = None;
    while let Some(measured) = ctx.control.begin() {
        let plan = plan_closed(&mix, &sizes, &mut *ctx.rng.borrow_mut());
        let started = Instant::now();
        ctx.start(measured);
        let result = tokio::time::timeout(
            ctx.config.timeout,
            ctx.exchange(&mut conn, &plan, keep_alive),
        )
        .await
        .unwrap_or(Err(Failure::Timeout));
        if result.is_err() {
            conn = None;
        }
        ctx.finish(Finished {
            measured,
            started,
            plan: &plan,
            revisit: false,
            result: &result,
        });
    }
}
