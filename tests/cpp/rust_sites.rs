// SPDX-License-Identifier: MIT
// A Rust program whose allocation sites are known (test_cpp_sites.c): Vec growth, String
// and Box, each in a function of its own, every block kept until exit. With an argument it
// prints "site bytes" lines instead of running.
//
// A normal Rust main: Rust's runtime start-up calls pthread_getattr_np on the main thread,
// which allocates under the thread's lock; the tracer must not deadlock there
// (tests/tracer/test_getattr_record.c).
// std::hint::black_box is stable only from Rust 1.66; Debian 12's rustc is 1.63. A
// volatile read of the value keeps the optimiser from seeing through it the same way.
#[inline(never)]
fn black_box<T>(x: T) -> T {
    let copy = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    copy
}

const VEC_PUSHES: u64 = 1000;
const STRINGS: usize = 10;
const BOXES: usize = 50;

#[inline(never)]
fn site_vec(keep: &mut Vec<Vec<u64>>) {
    let mut v = Vec::new();
    for i in 0..VEC_PUSHES {
        v.push(black_box(i));
    }
    keep.push(v);
}

#[inline(never)]
fn site_string(keep: &mut Vec<String>) {
    for _ in 0..STRINGS {
        let mut s = String::with_capacity(black_box(120));
        s.push('x');
        keep.push(s);
    }
}

#[inline(never)]
fn site_box(keep: &mut Vec<Box<[u64; 16]>>) {
    for i in 0..BOXES {
        keep.push(Box::new([black_box(i as u64); 16]));
    }
}

fn main() {
    if std::env::args().len() > 1 {
        // Vec<u64> grows 4, 8, ... 1024 elements (RawVec's first capacity for 8-byte items).
        let mut cap = 4u64;
        let mut vec_bytes = 0u64;
        loop {
            vec_bytes += cap * 8;
            if cap >= VEC_PUSHES {
                break;
            }
            cap *= 2;
        }
        println!("site_vec {}", vec_bytes);
        println!("site_string {}", STRINGS * 120);
        println!("site_box {}", BOXES * 128);
        return;
    }
    let mut vecs = Vec::with_capacity(1);
    let mut strings = Vec::with_capacity(STRINGS);
    let mut boxes = Vec::with_capacity(BOXES);
    site_vec(&mut vecs);
    site_string(&mut strings);
    site_box(&mut boxes);
    black_box((&vecs, &strings, &boxes));
    std::mem::forget((vecs, strings, boxes));
}
