//! update_snapshot on 5,000 nodes × 30 pods with 0, 2, 100 and all nodes changed, against
//! a full rebuild; and 2 changed nodes on 20,000 nodes, to show the cost follows the
//! change, not the cluster size.

use std::cell::Cell;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use gantry_cache::Snapshot;
use gantry_cache::synthetic::{cluster, touch_nodes};

fn incremental(c: &mut Criterion) {
    let mut group = c.benchmark_group("update_snapshot");
    group.sample_size(20);
    for nodes in [5_000, 20_000] {
        let cache = cluster(nodes, 30);
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot).unwrap();
        let changes: &[usize] = if nodes == 5_000 {
            &[0, 2, 100, 5_000]
        } else {
            &[2]
        };
        for &changed in changes {
            let round = Cell::new(0);
            group.bench_function(format!("{nodes}_nodes/{changed}_changed"), |b| {
                b.iter_batched(
                    || {
                        round.set(round.get() + 1);
                        touch_nodes(&cache, nodes, changed, round.get());
                    },
                    |()| cache.update_snapshot(&mut snapshot),
                    BatchSize::PerIteration,
                )
            });
        }
        group.bench_function(format!("{nodes}_nodes/full_rebuild"), |b| {
            b.iter(|| cache.full_snapshot())
        });
    }
    group.finish();
}

criterion_group!(benches, incremental);
criterion_main!(benches);
