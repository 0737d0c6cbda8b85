//! The files a sweep writes, in the published layouts
//! (`experiments/analysis/expected_results/`): `allocation.csv` (the layout of
//! `analysis_allo_discrete.csv`), `analysis_frag_discrete.csv` and
//! `analysis_frag_ratio_discrete.csv`. Rows are sorted by (workload, policy, tune, seed)
//! as the merge scripts walk sorted directories, so shards merged give the same bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::analysis::{COLUMNS, py_repr};

/// The three curve files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Allocation,
    FragAmount,
    FragRatio,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Allocation, Kind::FragAmount, Kind::FragRatio];

    pub fn file(self) -> &'static str {
        match self {
            Kind::Allocation => "allocation.csv",
            Kind::FragAmount => "analysis_frag_discrete.csv",
            Kind::FragRatio => "analysis_frag_ratio_discrete.csv",
        }
    }

    pub fn header(self) -> String {
        let mut h = String::from("workload,sc_policy,tune,seed");
        if self == Kind::Allocation {
            h.push_str(",total_gpus");
        }
        for c in 0..COLUMNS {
            h.push_str(&format!(",{c}"));
        }
        h
    }
}

/// (workload, sc_policy, tune, seed): a row's key and its sort order.
pub type Key = (String, String, String, String);

/// One experiment's row of one file.
pub fn format_row(kind: Kind, key: &Key, total_gpus: i64, values: &[f64]) -> String {
    let mut s = format!("{},{},{},{}", key.0, key.1, key.2, key.3);
    if kind == Kind::Allocation {
        s.push_str(&format!(",{total_gpus}"));
    }
    for v in values {
        s.push(',');
        s.push_str(&py_repr(*v));
    }
    s
}

/// The most one result file (of a part to merge, or published curves to compare with) may
/// hold: some 250,000 experiments' rows.
pub const MAX_RESULT_BYTES: u64 = 256 << 20;

/// The rows of the three files, by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    pub rows: BTreeMap<Kind, BTreeMap<Key, String>>,
}

/// An error of reading or joining result files: one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Format {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl Results {
    pub fn insert(&mut self, kind: Kind, key: Key, row: String) -> Option<String> {
        self.rows.entry(kind).or_default().insert(key, row)
    }

    /// The file's text: header, then rows in key order.
    pub fn text(&self, kind: Kind) -> String {
        let mut s = kind.header();
        s.push('\n');
        for row in self.rows.get(&kind).into_iter().flat_map(|m| m.values()) {
            s.push_str(row);
            s.push('\n');
        }
        s
    }

    pub fn write(&self, dir: &Path) -> Result<(), OutputError> {
        std::fs::create_dir_all(dir).map_err(|source| OutputError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        for kind in Kind::ALL {
            let path = dir.join(kind.file());
            std::fs::write(&path, self.text(kind))
                .map_err(|source| OutputError::Io { path, source })?;
        }
        Ok(())
    }

    /// Adds the rows of one part (a directory a sweep or shard wrote): `files` are its
    /// three files, path and text, in [`Kind::ALL`] order (the caller reads them, within
    /// [`MAX_RESULT_BYTES`]). A row already present (the same experiment in two parts) is
    /// an error naming both; so are three files that do not hold the same experiments.
    pub fn add_part(&mut self, files: &[(PathBuf, String); 3]) -> Result<(), OutputError> {
        let mut part: Vec<BTreeMap<Key, (usize, &str)>> = Vec::new();
        for (kind, (path, text)) in Kind::ALL.into_iter().zip(files) {
            let err = |line: usize, message: String| OutputError::Format {
                path: path.clone(),
                line,
                message,
            };
            let mut lines = text.lines().enumerate();
            match lines.next() {
                Some((_, h)) if h == kind.header() => {}
                _ => return Err(err(1, format!("header is not `{}`", kind.header()))),
            }
            let fields = 4 + usize::from(kind == Kind::Allocation) + COLUMNS;
            let mut rows = BTreeMap::new();
            for (i, line) in lines {
                let parts: Vec<&str> = line.split(',').collect();
                if parts.len() != fields {
                    return Err(err(
                        i + 1,
                        format!("{} fields, expected {fields}", parts.len()),
                    ));
                }
                let key = (
                    parts[0].to_string(),
                    parts[1].to_string(),
                    parts[2].to_string(),
                    parts[3].to_string(),
                );
                let (w, p, t, s) = &key;
                if self.rows.get(&kind).is_some_and(|r| r.contains_key(&key)) {
                    return Err(err(
                        i + 1,
                        format!("experiment {w} {p} {t} {s} is already in another part"),
                    ));
                }
                if rows.insert(key.clone(), (i + 1, line)).is_some() {
                    return Err(err(
                        i + 1,
                        format!("experiment {w} {p} {t} {s} is already on an earlier line"),
                    ));
                }
            }
            part.push(rows);
        }
        let (first, first_path) = (&part[0], &files[0].0);
        for (rows, (path, _)) in part.iter().zip(files).skip(1) {
            let stray = rows.iter().find(|(k, _)| !first.contains_key(*k));
            if let Some(((w, p, t, s), (line, _))) = stray {
                return Err(OutputError::Format {
                    path: path.clone(),
                    line: *line,
                    message: format!(
                        "experiment {w} {p} {t} {s} is not in {}: a part's three files hold the same experiments",
                        first_path.display()
                    ),
                });
            }
            let missing = first.iter().find(|(k, _)| !rows.contains_key(*k));
            if let Some(((w, p, t, s), (line, _))) = missing {
                return Err(OutputError::Format {
                    path: first_path.clone(),
                    line: *line,
                    message: format!(
                        "experiment {w} {p} {t} {s} is not in {}: a part's three files hold the same experiments",
                        path.display()
                    ),
                });
            }
        }
        for (kind, rows) in Kind::ALL.into_iter().zip(part) {
            for (key, (_, line)) in rows {
                self.insert(kind, key, line.to_string());
            }
        }
        Ok(())
    }

    /// The mean curve over seeds per (workload, policy) of a file, from its rows.
    pub fn means(&self, kind: Kind) -> BTreeMap<(String, String), Vec<f64>> {
        means_of(
            self.rows
                .get(&kind)
                .into_iter()
                .flat_map(|m| m.values().map(|s| s.as_str())),
            kind == Kind::Allocation,
        )
    }
}

/// Mean per column over the rows of each (workload, policy); empty fields are skipped.
pub fn means_of<'a>(
    rows: impl Iterator<Item = &'a str>,
    with_total: bool,
) -> BTreeMap<(String, String), Vec<f64>> {
    let skip = 4 + usize::from(with_total);
    let mut sums: BTreeMap<(String, String), (Vec<f64>, Vec<u32>)> = BTreeMap::new();
    for row in rows {
        let parts: Vec<&str> = row.split(',').collect();
        if parts.len() < skip {
            continue;
        }
        let e = sums
            .entry((parts[0].to_string(), parts[1].to_string()))
            .or_insert_with(|| (vec![0.0; COLUMNS], vec![0; COLUMNS]));
        for (c, v) in parts[skip..].iter().take(COLUMNS).enumerate() {
            if let Ok(v) = v.parse::<f64>() {
                e.0[c] += v;
                e.1[c] += 1;
            }
        }
    }
    sums.into_iter()
        .map(|(k, (s, n))| {
            let m = s
                .iter()
                .zip(n)
                .map(|(s, n)| if n == 0 { f64::NAN } else { s / f64::from(n) })
                .collect();
            (k, m)
        })
        .collect()
}

/// Per (workload, policy) in both: the largest |ours − published| of the mean curves and
/// the column where it is, with the seeds each side averaged.
#[derive(Debug, Clone, PartialEq)]
pub struct Deviation {
    pub workload: String,
    pub policy: String,
    pub max_abs: f64,
    pub at: usize,
    pub ours_at: f64,
    pub published_at: f64,
}

pub fn deviations(
    ours: &BTreeMap<(String, String), Vec<f64>>,
    published: &BTreeMap<(String, String), Vec<f64>>,
) -> Vec<Deviation> {
    let mut out = Vec::new();
    for (k, mine) in ours {
        let Some(theirs) = published.get(k) else {
            continue;
        };
        let mut best: Option<Deviation> = None;
        for c in 0..COLUMNS {
            let (a, b) = (mine[c], theirs[c]);
            if a.is_nan() || b.is_nan() {
                continue;
            }
            let d = (a - b).abs();
            if best.as_ref().is_none_or(|x| d > x.max_abs) {
                best = Some(Deviation {
                    workload: k.0.clone(),
                    policy: k.1.clone(),
                    max_abs: d,
                    at: c,
                    ours_at: a,
                    published_at: b,
                });
            }
        }
        out.extend(best);
    }
    out
}
