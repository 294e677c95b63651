// Hash maps and sorting through generics: the Rust programs of the name tests (legacy and v0 mangling).
use std::collections::HashMap;
#[inline(never)]
fn churn<T: std::hash::Hash + Eq + Clone>(keys: &[T], rounds: usize) -> usize {
    let mut m: HashMap<T, usize> = HashMap::new();
    for r in 0..rounds { for k in keys { *m.entry(k.clone()).or_insert(0) += r; } }
    m.len()
}
struct Sorter { v: Vec<u64> }
impl Sorter {
    #[inline(never)]
    fn run(&mut self, round: u64) -> u64 {
        for (i, x) in self.v.iter_mut().enumerate() { *x = (i as u64).wrapping_mul(2654435761).wrapping_add(round) & 0xffff; }
        self.v.sort();
        self.v[0]
    }
}
fn main() {
    let keys: Vec<String> = (0..3000).map(|i| format!("k{}", i)).collect();
    let mut s = Sorter { v: vec![0; 50000] };
    let mut t = 0u64;
    for r in 0..60 { t += churn(&keys, 3) as u64; t += s.run(r); }
    println!("{}", t);
}
