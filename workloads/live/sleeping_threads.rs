// sleeping_threads: Rust threads parked in std::thread::sleep below a few frames of their own,
// the main thread joining them; prints "ready" once all are. For the live backtrace's oracles
// (tests/integration/test_backtrace_live.py).
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[inline(never)]
fn descend(depth: u32, ready: &AtomicUsize) -> u32 {
    if depth == 0 {
        ready.fetch_add(1, Ordering::SeqCst);
        loop {
            std::thread::sleep(Duration::from_secs(1000));
        }
    }
    descend(depth - 1, ready) + std::hint::black_box(depth)
}

fn main() {
    let ready = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let ready = Arc::clone(&ready);
            std::thread::spawn(move || descend(5 + i, &ready))
        })
        .collect();
    while ready.load(Ordering::SeqCst) < 3 {
        std::thread::yield_now();
    }
    println!("ready");
    for thread in threads {
        thread.join().unwrap();
    }
}
