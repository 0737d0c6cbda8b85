//! Upstream's test tables (`gpu_packing_score_test.go`, `frag_test.go`) and hand-checked
//! tables for the policies that have none upstream.

use std::sync::Arc;

use smallvec::SmallVec;

use super::model::*;
use super::policy::*;

fn node(cpu_left: i64, cards: &[i64], model: &str) -> NodeRes {
    NodeRes {
        cpu_left,
        cpu_capacity: 96_000,
        cards: SmallVec::from_slice(cards),
        model: Arc::from(model),
    }
}

fn pod(cpu: i64, milli: i64, num: i64, model: &str) -> PodRes {
    PodRes {
        cpu,
        milli,
        num,
        model: Arc::from(model),
    }
}

fn typical(rows: &[(i64, i64, i64, &str, f64)]) -> TypicalPods {
    TypicalPods {
        pods: rows
            .iter()
            .map(|&(c, m, n, t, pct)| (pod(c, m, n, t), pct / 100.0))
            .collect(),
    }
}

#[test]
fn gpu_packing_upstream_table() {
    // pkg/simulator/plugin/gpu_packing_score_test.go
    let cases = [
        (&[200, 1000, 1000, 500][..], pod(100, 1000, 2, "1080"), 48),
        (&[1000, 1000, 1000, 1000][..], pod(100, 1000, 2, "1080"), 29),
        (&[1000; 8][..], pod(100, 1000, 2, "1080"), 25),
        (&[200, 1000, 1000, 500][..], pod(100, 200, 2, "1080"), 93),
    ];
    for (cards, p, want) in cases {
        let n = node(1000, cards, "1080");
        assert_eq!(gpu_packing_score(&n, &p), Some(want), "{cards:?} {p:?}");
        assert_eq!(&n.cards[..], cards, "the card order is left alone");
    }
    assert_eq!(
        gpu_packing_score(&node(1000, &[100], "T4"), &pod(1, 500, 1, "")),
        None
    );
    assert_eq!(
        gpu_packing_score(&node(1000, &[100], "T4"), &pod(1, 0, 0, "")),
        Some(0)
    );
}

const TYPICAL: &[(i64, i64, i64, &str, f64)] = &[
    (6000, 465, 1, "", 9.33),
    (8000, 440, 1, "2080", 9.15),
    (8000, 475, 1, "T4", 8.76),
    (8000, 440, 1, "P100", 8.72),
    (2000, 465, 1, "", 8.68),
    (12000, 900, 1, "", 8.65),
    (4000, 900, 1, "", 8.43),
    (16000, 678, 1, "T4", 8.36),
    (8000, 500, 1, "", 8.29),
    (6000, 511, 1, "", 8.11),
    (14000, 1000, 2, "2080", 0.54),
    (4000, 1000, 1, "2080", 0.43),
    (32000, 1000, 2, "T4", 0.43),
    (16000, 1000, 1, "V100M16", 0.40),
    (64000, 1000, 2, "", 0.40),
    (10000, 1000, 2, "", 0.40),
    (11400, 1000, 1, "T4", 0.36),
    (16000, 1000, 1, "T4", 0.36),
    (4000, 1000, 2, "", 0.36),
    (14000, 1000, 2, "V100M16", 0.36),
    (8000, 1000, 4, "", 0.36),
    (16000, 1000, 2, "", 0.32),
    (2000, 1000, 1, "T4", 0.32),
    (6000, 1000, 1, "", 0.32),
    (4000, 1000, 1, "", 0.32),
    (5000, 1000, 1, "", 0.32),
    (32000, 1000, 4, "V100M16", 0.32),
    (32000, 1000, 2, "", 0.32),
    (24000, 1000, 8, "2080", 0.32),
    (40000, 1000, 4, "", 0.29),
    (32000, 1000, 8, "", 0.29),
    (32000, 1000, 1, "T4", 0.29),
    (16000, 1000, 1, "", 0.25),
    (7000, 1000, 1, "V100M16", 0.25),
    (24000, 1000, 1, "T4", 0.25),
];

const TYPICAL_WITH_CPU: &[(i64, i64, i64, &str, f64)] = &[
    (15700, 1000, 1, "", 28.69),
    (11900, 1000, 1, "", 18.93),
    (11400, 1000, 1, "", 12.27),
    (1000, 0, 0, "", 7.36),
    (18710, 1000, 1, "", 4.85),
    (8200, 1000, 1, "", 3.79),
    (16400, 1000, 1, "", 3.31),
    (9810, 1000, 1, "", 1.97),
    (15200, 1000, 1, "", 1.87),
    (11200, 1000, 1, "", 1.81),
    (14200, 1000, 1, "", 1.76),
    (12000, 0, 0, "", 1.65),
    (14900, 1000, 1, "", 1.39),
    (60200, 1000, 4, "", 1.23),
    (64200, 1000, 8, "", 1.07),
    (32200, 1000, 4, "", 1.01),
    (17400, 1000, 2, "", 0.91),
    (30200, 1000, 2, "", 0.69),
    (16000, 1000, 1, "", 0.64),
    (15000, 1000, 1, "", 0.59),
    (64000, 1000, 8, "", 0.53),
    (15000, 0, 0, "", 0.53),
    (11910, 1000, 1, "", 0.53),
    (120200, 1000, 8, "", 0.48),
    (11300, 1000, 1, "", 0.37),
    (30000, 1000, 2, "", 0.32),
    (9800, 1000, 1, "", 0.32),
    (8000, 1000, 1, "", 0.32),
    (2000, 1000, 1, "", 0.27),
    (2000, 80, 1, "", 0.27),
    (1000, 1000, 1, "", 0.27),
];

#[test]
fn fragment_upstream_tables() {
    // pkg/utils/frag_test.go: TestNodeGpuShareFragAmountScore, ...WithNonGpu
    let t = typical(TYPICAL);
    let close = |got: f64, want: f64| assert!((got - want).abs() < 0.01, "{got} vs {want}");
    close(
        t.frag(&node(1000, &[200, 1000, 1000, 500], "1080"))
            .fragment(),
        2566.62,
    );
    close(t.frag(&node(1000, &[1000; 4], "1080")).fragment(), 3802.40);
    close(t.frag(&node(1000, &[1000; 8], "1080")).fragment(), 7604.80);
    let one = typical(&TYPICAL[..1]);
    let lacking = node(1000, &[200, 1000, 1000, 500], "1080");
    assert_eq!(node_pod_bucket(&lacking, &one.pods[0].0), Q4_LACK_CPU);
    assert_eq!(lacking.gpu_left(), 2700);
    close(one.frag(&lacking).fragment(), 251.91);

    let t = typical(TYPICAL_WITH_CPU);
    close(t.frag(&node(64000, &[1000; 8], "P100")).fragment(), 887.20);
    let halved = [1000, 1000, 1000, 1000, 0, 0, 0, 0];
    close(t.frag(&node(32000, &halved, "P100")).fragment(), 554.4);
    close(t.frag(&node(0, &halved, "P100")).fragment(), 4000.0);
}

#[test]
fn typical_pods_order_threshold_and_frequencies() {
    let (a, b, c) = (
        pod(1000, 500, 1, ""),
        pod(2000, 0, 0, ""),
        pod(3000, 0, 0, ""),
    );
    let work = [&a, &a, &a, &b, &b, &c];
    let all = TypicalPods::with_threshold(work, 95);
    let got: Vec<_> = all.pods.iter().map(|(p, f)| (p.cpu, *f)).collect();
    assert_eq!(got, vec![(1000, 0.5), (2000, 2.0 / 6.0), (3000, 1.0 / 6.0)]);
    // 80 %: A and B reach 5 of 6 pods; renormalised over them.
    let top = TypicalPods::with_threshold(work, 80);
    let got: Vec<_> = top.pods.iter().map(|(p, f)| (p.cpu, *f)).collect();
    assert_eq!(
        got,
        vec![(1000, 0.5 / (5.0 / 6.0)), (2000, (2.0 / 6.0) / (5.0 / 6.0))]
    );
    // Equal counts: the larger resource first (the reverse of upstream's Less).
    let tie = TypicalPods::with_threshold([&b, &c], 95);
    assert_eq!(tie.pods[0].0.cpu, 3000);
}

#[test]
fn dot_product_table() {
    // nv = [64000/128000, 2000/8000], pv = [8000/128000, 500/8000]:
    // dot = 0.5*0.0625 + 0.25*0.0625 = 0.046875; 100*(1 - dot/2) = 97.66 -> 97.
    assert_eq!(
        dot_product_score(&node(64000, &[1000, 1000], "T4"), &pod(8000, 500, 1, "")),
        97
    );
    // Empty node, a CPU task: dot = 1.0*0.125 = 0.125 -> 93.75 -> 93.
    assert_eq!(
        dot_product_score(&node(128000, &[], ""), &pod(16000, 0, 0, "")),
        93
    );
    assert_eq!(
        dot_product_score(&node(100, &[1000], "T4"), &pod(200, 0, 0, "")),
        0
    );
}

#[test]
fn gpu_clustering_table() {
    let n = node(1000, &[1000, 1000, 1000, 1000, 0, 0, 0, 0], "G2");
    let share = pod(1000, 300, 1, "");
    let mut aff = Affinity::default();
    // base 25*(8000-4000)/8000 = 12
    assert_eq!(gpu_clustering_score(&n, &aff, &share), 37);
    aff.add(&pod(1, 1000, 2, ""), 1);
    assert_eq!(gpu_clustering_score(&n, &aff, &share), 12);
    aff.add(&share, 1);
    assert_eq!(gpu_clustering_score(&n, &aff, &share), 62);
    aff.add(&pod(1, 1000, 2, ""), -1);
    assert_eq!(gpu_clustering_score(&n, &aff, &share), 87);
    assert_eq!(gpu_clustering_score(&n, &aff, &pod(1, 0, 0, "")), 0);
}

#[test]
fn best_fit_table_and_normalisation() {
    // (56000/128000 + 1500/8000) / 2 = 0.3125 -> (1 - 0.3125) * 100 = 68.75 -> 68
    assert_eq!(
        best_fit_raw(&node(64000, &[1000, 1000], "T4"), &pod(8000, 500, 1, "")),
        Some(68)
    );
    assert_eq!(
        best_fit_raw(&node(100, &[1000], "T4"), &pod(8000, 0, 0, "")),
        None
    );
    let mut s = [68, 50, 59];
    normalize_min_max(&mut s);
    assert_eq!(s, [100, 0, 50]);
    let mut same = [7, 7];
    normalize_min_max(&mut same);
    assert_eq!(same, [0, 0]);
}

#[test]
fn fgd_table() {
    // One typical pod: 1000m cpu, 500 milli on one card.
    let t = typical(&[(1000, 500, 1, "", 100.0)]);
    let mut f = |n: &NodeRes| t.frag(n).fragment();
    let n = node(8000, &[1000, 300], "T4");
    assert_eq!(f(&n), 300.0);
    // 200 milli: card 0 leaves F at 300 (sigmoid 0 -> 50); card 1 cuts it to 100
    // (sigmoid(0.2) = 0.5498 -> 54): card 1.
    let (s, cards) = fgd_score(&n, &pod(1000, 200, 1, ""), &mut f);
    assert_eq!((s, &cards[..]), (54, &[1][..]));
    // 600 milli fits card 0 only; F becomes 700 (sigmoid(-0.4) = 0.4013 -> 40).
    let (s, cards) = fgd_score(&n, &pod(1000, 600, 1, ""), &mut f);
    assert_eq!((s, &cards[..]), (40, &[0][..]));
    // A whole card: Sub takes card 0, leaving [0, 300]; no card hosts 500 any more, so
    // all 300 left is fragment: F stays 300, sigmoid(0) -> 50.
    let (s, cards) = fgd_score(&n, &pod(1000, 1000, 1, ""), &mut f);
    assert_eq!((s, &cards[..]), (50, &[0][..]));
    // On [1000, 1000] a whole card leaves [0, 1000]: F 0 -> 0 (Q3, nothing below 500).
    let (s, _) = fgd_score(
        &node(8000, &[1000, 1000], "T4"),
        &pod(1000, 1000, 1, ""),
        &mut f,
    );
    assert_eq!(s, 50);
}

#[test]
fn filter_and_card_choice() {
    let n = node(1000, &[300, 1000, 600, 1000], "V100M16");
    assert!(gpu_fits(&n, &pod(1, 500, 1, "V100M16|V100M32")));
    assert!(!gpu_fits(&n, &pod(1, 500, 1, "V100M32")));
    assert!(gpu_fits(&n, &pod(1, 1000, 2, "")));
    assert!(!gpu_fits(&n, &pod(1, 1000, 3, "")));
    assert!(
        gpu_fits(&n, &pod(1, 0, 0, "T4")),
        "CPU tasks ignore the model"
    );
    assert!(!gpu_fits(&node(1000, &[], ""), &pod(1, 100, 1, "")));
    assert_eq!(best_fit_card(&n, 500), Some(2));
    assert_eq!(best_fit_card(&n, 200), Some(0));
    assert_eq!(best_fit_card(&n, 800), Some(1));
    assert_eq!(&fitting_cards(&n, 500)[..], &[1, 2, 3]);
    assert_eq!(&exclusive_cards(&n, &pod(1, 1000, 2, ""))[..], &[1, 3]);
    assert_eq!(
        n.sub(&pod(100, 500, 1, "")).cards.as_slice(),
        &[300, 1000, 100, 1000]
    );
}

#[test]
fn policy_names() {
    assert_eq!(Policy::Fgd.column(), "06-FGD");
    assert_eq!(Policy::Random.column(), "01-Random");
    assert_eq!(Policy::parse("fgd"), Some(Policy::Fgd));
    assert_eq!(Policy::parse("BestFitScore"), Some(Policy::BestFit));
    assert_eq!(
        Policy::parse("03-GpuClustering"),
        Some(Policy::GpuClustering)
    );
    assert_eq!(Policy::parse("nope"), None);
}
