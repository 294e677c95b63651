// The corpus's Rust program (rustc links it with rust-lld): deep calls, a closure called back by
// the standard library's sort, a HashMap, formatting.
use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

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
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut sink = 0u64;
    while Instant::now() < end {
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
