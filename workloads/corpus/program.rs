// The corpus's Rust program (rustc links it with rust-lld): deep calls, a closure called back by
// the standard library's sort, a HashMap, formatting.
use std::collections::HashMap;
use std::hint::black_box;

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
}

/// The process's CPU time in seconds (CLOCK_PROCESS_CPUTIME_ID): the loop runs for CPU seconds, so a
/// loaded machine records as many cpu-clock samples as an idle one.
fn cpu_seconds() -> f64 {
    let mut t = Timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { clock_gettime(2, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

#[inline(never)]
fn leaf(n: u64) -> u64 {
    let mut s = 0u64;
    for i in 0..n {
        s = s.wrapping_add(i.wrapping_mul(i) ^ (s >> 3));
    }
    s
}

#[inline(never)]
fn descend(depth: u32, n: u64) -> u64 {
    if depth == 0 {
        return leaf(n);
    }
    black_box(descend(depth - 1, n)).wrapping_add(depth as u64)
}

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    let end = cpu_seconds() + seconds;
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut sink = 0u64;
    while cpu_seconds() < end {
        sink = sink.wrapping_add(descend(6, 2000));
        let mut numbers: Vec<u32> = (0..256u32).map(|i| (i * 7919) % 256).collect();
        numbers.sort_by(|a, b| {
            sink = sink.wrapping_add(leaf(50));
            a.cmp(b)
        });
        *counts.entry(format!("key{}", sink % 64)).or_insert(0) += 1;
    }
    println!("{} {}", sink, counts.len());
}
