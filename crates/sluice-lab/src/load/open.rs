//! The open loop, PolyMix-like robots: each robot sends requests at its own Poisson rate
//! whatever happens to earlier ones, so a slow proxy meets the same schedule as a fast one
//! (no coordinated omission), and response times run from when a request was due.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

use super::client::{Conn, Failure};
use super::thread::{Finished, LiveGuard, ThreadContext};
use super::Pattern;

/// An idle persistent connection and how many requests it may carry in all.
#[derive(Debug)]
struct Pooled {
    conn: Conn,
    cap: Option<u64>,
}

type Pool = Rc<RefCell<Vec<Pooled>>>;

/// One robot: schedules requests until the run stops or runs out of requests. A request
/// due while earlier ones are still out goes on another connection.
pub async fn robot(ctx: Rc<ThreadContext>, _live: LiveGuard) {
    let Pattern::Open { rate, .. } = ctx.config.pattern else {
        return;
    };
    let pool: Pool = Rc::new(RefCell::new(Vec::new()));
    let mut rng = SmallRng::from_rng(&mut *ctx.rng.borrow_mut());
    // Exp::new fails only for a negative rate, which the configuration refuses.
    let gaps = Exp::new(rate).expect("rate is positive");
    let mut next = Instant::now() + Duration::from_secs_f64(gaps.sample(&mut rng));
    loop {
        tokio::time::sleep_until(next.into()).await;
        let Some(measured) = ctx.control.begin() else {
            break;
        };
        let live = LiveGuard::enter(&ctx.control);
        tokio::task::spawn_local(request(ctx.clone(), pool.clone(), next, measured, live));
        next += Duration::from_secs_f64(gaps.sample(&mut rng));
    }
}

async fn request(
    ctx: Rc<ThreadContext>,
    pool: Pool,
    due: Instant,
    measured: bool,
    _live: LiveGuard,
) {
    let Pattern::Open {
        conn_requests,
        hit_ratio,
        ..
    } = ctx.config.pattern
    else {
        return;
    };
    let (plan, revisit) = ctx
        .history
        .borrow_mut()
        .plan(hit_ratio, &mut *ctx.rng.borrow_mut());
    let pooled = pool.borrow_mut().pop();
    let (mut conn, cap) = match pooled {
        Some(p) => (Some(p.conn), p.cap),
        None => (None, conn_requests.sample(&mut *ctx.rng.borrow_mut())),
    };
    let sent_before = conn.as_ref().map_or(0, |c| c.requests);
    let keep_alive = cap.is_none_or(|cap| sent_before + 1 < cap);
    ctx.start(measured);
    let result = tokio::time::timeout(
        ctx.config.timeout,
        ctx.exchange(&mut conn, &plan, keep_alive),
    )
    .await
    .unwrap_or(Err(Failure::Timeout));
    if let (Ok(_), Some(conn)) = (&result, conn) {
        pool.borrow_mut().push(Pooled { conn, cap });
    }
    ctx.finish(Finished {
        measured,
        started: due,
        plan: &plan,
        revisit,
        result: &result,
    });
}
