//! openb CSVs (the artifact's `data/csv/`): nodes `sn,cpu_milli,memory_mib,gpu,model`,
//! tasks `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...`, read as the artifact's
//! `data/pod_csv_to_yaml.py` writes its pods. Errors name the file, line and field. The
//! text is read by the caller (the CLI within [`MAX_TRACE_BYTES`]); this module reads no file.

use std::collections::HashMap;
use std::num::IntErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gantry_framework::plugins::openb::{NodeRes, PodRes};
use smallvec::SmallVec;

/// The most a trace CSV may hold: the published ones are under 1 MiB (8,152 tasks).
pub const MAX_TRACE_BYTES: u64 = 64 << 20;

/// A trace that cannot be swept: one line, naming the file (and the line and field where
/// there is one).
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{path}:{line}: {message}")]
    Field {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// A node of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceNode {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub gpus: i64,
    /// Empty for a node without GPUs.
    pub model: Arc<str>,
}

impl TraceNode {
    /// The empty node as the policies see it: every card free.
    pub fn res(&self) -> NodeRes {
        NodeRes {
            cpu_left: self.cpu_milli,
            cpu_capacity: self.cpu_milli,
            cards: SmallVec::from_elem(1000, self.gpus as usize),
            model: self.model.clone(),
        }
    }
}

/// A task of the trace, as the simulator reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TracePod {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: i64,
    /// Per card: `gpu_milli` clamped to 0..=1000 as `pod_csv_to_yaml.py` writes it, 0
    /// without cards.
    pub gpu_milli: i64,
    /// Allowed models, `|`-separated; empty for any.
    pub gpu_spec: Arc<str>,
}

impl TracePod {
    /// The task as the policies see it (`GetPodResource`: cpu 0 counts as 100m).
    pub fn res(&self) -> PodRes {
        PodRes {
            cpu: if self.cpu_milli == 0 {
                100
            } else {
                self.cpu_milli
            },
            milli: self.gpu_milli,
            num: self.num_gpu,
            model: self.gpu_spec.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct NodeTrace {
    pub path: PathBuf,
    pub nodes: Vec<TraceNode>,
}

impl NodeTrace {
    pub fn total_gpus(&self) -> i64 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }
}

#[derive(Debug, Clone)]
pub struct PodTrace {
    pub path: PathBuf,
    /// The file name without `.csv`: the `workload` column.
    pub stem: String,
    pub pods: Vec<TracePod>,
}

/// One CSV line split into fields; double quotes as RFC 4180 has them (no newlines inside).
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' if quoted => quoted = false,
            '"' if cur.is_empty() => quoted = true,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    out.push(cur);
    Ok(out)
}

/// Decimals are read up to 9e15, where an f64 still holds every integer.
const MAX_DECIMAL: f64 = 9.0e15;

struct Table<'a> {
    path: &'a Path,
    columns: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

impl<'a> Table<'a> {
    fn parse(path: &'a Path, text: &str) -> Result<Table<'a>, TraceError> {
        let err = |line, message| TraceError::Field {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let (_, header) = lines
            .find(|(_, l)| !l.trim().is_empty())
            .ok_or_else(|| err(1, "empty file, expected a header line".into()))?;
        let columns = split(header.trim_start_matches('\u{feff}'))
            .map_err(|m| err(1, m))?
            .into_iter()
            .map(|c| c.trim().to_string())
            .collect();
        let mut rows = Vec::new();
        for (n, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            rows.push((
                n,
                split(line.trim_end_matches('\r')).map_err(|m| err(n, m))?,
            ));
        }
        Ok(Table {
            path,
            columns,
            rows,
        })
    }

    fn column(&self, name: &str) -> Result<usize, TraceError> {
        self.columns
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| TraceError::Field {
                path: self.path.to_path_buf(),
                line: 1,
                message: format!("no column `{name}` in the header"),
            })
    }

    fn text<'r>(
        &self,
        row: &'r (usize, Vec<String>),
        col: usize,
        name: &str,
    ) -> Result<&'r str, TraceError> {
        row.1
            .get(col)
            .map(|s| s.trim())
            .ok_or_else(|| TraceError::Field {
                path: self.path.to_path_buf(),
                line: row.0,
                message: format!(
                    "field `{name}`: missing (the line has {} fields)",
                    row.1.len()
                ),
            })
    }

    /// An integer; a decimal is cut toward zero as Python's `%d` cuts it; empty or
    /// `nan` is `missing`.
    fn int(
        &self,
        row: &(usize, Vec<String>),
        col: usize,
        name: &str,
        missing: Option<i64>,
    ) -> Result<i64, TraceError> {
        let s = self.text(row, col, name)?;
        let bad = |what: &str| TraceError::Field {
            path: self.path.to_path_buf(),
            line: row.0,
            message: format!("field `{name}`: {what}, found {s:?}"),
        };
        if s.is_empty() || s.eq_ignore_ascii_case("nan") {
            return missing.ok_or_else(|| bad("expected a number"));
        }
        let v = match s.parse::<i64>() {
            Ok(v) => v,
            Err(e) if *e.kind() == IntErrorKind::PosOverflow => {
                return Err(bad(&format!(
                    "too large (out of range: at most {})",
                    i64::MAX
                )));
            }
            Err(e) if *e.kind() == IntErrorKind::NegOverflow => -1,
            Err(_) => match s.parse::<f64>() {
                Ok(f) if f.is_finite() && f.abs() < MAX_DECIMAL => f.trunc() as i64,
                Ok(f) if f < 0.0 => -1,
                Ok(f) if !f.is_nan() => {
                    return Err(bad(&format!(
                        "too large (out of range: at most {MAX_DECIMAL:e} written as a decimal)"
                    )));
                }
                _ => return Err(bad("expected a number")),
            },
        };
        if v < 0 {
            return Err(bad("expected a number not below 0"));
        }
        Ok(v)
    }
}

impl Table<'_> {
    /// The rows, refusing a table without any (a header line alone says nothing to sweep).
    fn rows(&self, what: &str) -> Result<&[(usize, Vec<String>)], TraceError> {
        if self.rows.is_empty() {
            return Err(TraceError::File {
                path: self.path.to_path_buf(),
                message: format!("no {what} after the header line"),
            });
        }
        Ok(&self.rows)
    }

    /// A name: not empty, and not one an earlier row of the file already has.
    fn name<'r>(
        &self,
        row: &'r (usize, Vec<String>),
        col: usize,
        field: &str,
        what: &str,
        seen: &mut HashMap<&'r str, usize>,
    ) -> Result<&'r str, TraceError> {
        let name = self.text(row, col, field)?;
        let err = |message| TraceError::Field {
            path: self.path.to_path_buf(),
            line: row.0,
            message,
        };
        if name.is_empty() {
            return Err(err(format!(
                "field `{field}`: empty, expected the {what}'s name"
            )));
        }
        if let Some(first) = seen.insert(name, row.0) {
            return Err(err(format!(
                "field `{field}`: {what} {name:?} is also on line {first}: names must be unique"
            )));
        }
        Ok(name)
    }
}

/// A node CSV's text (`path` names it in errors).
pub fn parse_nodes(path: &Path, text: &str) -> Result<NodeTrace, TraceError> {
    let t = Table::parse(path, text)?;
    let (sn, cpu, mem, gpu, model) = (
        t.column("sn")?,
        t.column("cpu_milli")?,
        t.column("memory_mib")?,
        t.column("gpu")?,
        t.column("model")?,
    );
    let rows = t.rows("nodes")?;
    let mut names = HashMap::new();
    let mut nodes = Vec::with_capacity(rows.len());
    for row in rows {
        let name = t.name(row, sn, "sn", "node", &mut names)?;
        let gpus = t.int(row, gpu, "gpu", None)?;
        if gpus > 64 {
            return Err(TraceError::Field {
                path: path.to_path_buf(),
                line: row.0,
                message: format!("field `gpu`: at most 64 cards per node, found {gpus}"),
            });
        }
        let m = t.text(row, model, "model")?;
        let m = if m.eq_ignore_ascii_case("nan") || gpus == 0 {
            ""
        } else {
            m
        };
        nodes.push(TraceNode {
            name: name.to_string(),
            cpu_milli: t.int(row, cpu, "cpu_milli", None)?,
            memory_mib: t.int(row, mem, "memory_mib", None)?,
            gpus,
            model: Arc::from(m),
        });
    }
    Ok(NodeTrace {
        path: path.to_path_buf(),
        nodes,
    })
}

/// A pod CSV's text (`path` names it in errors; its stem is the workload's name).
pub fn parse_pods(path: &Path, text: &str) -> Result<PodTrace, TraceError> {
    let t = Table::parse(path, text)?;
    let (name, cpu, mem, num, milli) = (
        t.column("name")?,
        t.column("cpu_milli")?,
        t.column("memory_mib")?,
        t.column("num_gpu")?,
        t.column("gpu_milli")?,
    );
    let spec = t.column("gpu_spec").ok();
    let rows = t.rows("tasks")?;
    let mut names = HashMap::new();
    let mut pods = Vec::with_capacity(rows.len());
    for row in rows {
        let pod_name = t.name(row, name, "name", "task", &mut names)?;
        let num_gpu = t.int(row, num, "num_gpu", None)?;
        let (gpu_milli, gpu_spec) = if num_gpu == 0 {
            (0, "")
        } else {
            let m = t.int(row, milli, "gpu_milli", Some(0))?;
            let s = match spec {
                Some(c) => t.text(row, c, "gpu_spec")?,
                None => "",
            };
            let s = if s.eq_ignore_ascii_case("nan") { "" } else { s };
            (m.min(1000), s)
        };
        if num_gpu.checked_mul(gpu_milli).is_none() {
            return Err(TraceError::Field {
                path: path.to_path_buf(),
                line: row.0,
                message: format!(
                    "field `num_gpu`: too large (out of range: {num_gpu} cards of {gpu_milli} milli-GPU are more than {} milli-GPU)",
                    i64::MAX
                ),
            });
        }
        // `pod_csv_to_yaml.py` drops empty names between `|`.
        let spec: Vec<&str> = gpu_spec.split('|').filter(|s| !s.is_empty()).collect();
        pods.push(TracePod {
            name: pod_name.to_string(),
            cpu_milli: t.int(row, cpu, "cpu_milli", None)?,
            memory_mib: t.int(row, mem, "memory_mib", Some(0))?,
            num_gpu,
            gpu_milli,
            gpu_spec: Arc::from(spec.join("|")),
        });
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(PodTrace {
        path: path.to_path_buf(),
        stem,
        pods,
    })
}

/// The workload names of pod traces (the `workload` column), from the files' canonical
/// `paths` in the order given: each file's stem, or for files whose stems are alike, the
/// stem under as many of its parent directories as tell them apart (`x/trace`, `y/trace`),
/// so no trace's results stand in for another's. Files that no directory tells apart (one
/// file twice; `trace.csv` beside `trace.txt`) and names the result CSVs cannot hold (a
/// comma, a quote, a line break) are errors naming the file.
pub fn workload_names(paths: &[PathBuf]) -> Result<Vec<String>, TraceError> {
    use std::path::Component;
    let parts: Vec<Vec<String>> = paths
        .iter()
        .map(|p| {
            let mut parts: Vec<String> = p
                .parent()
                .into_iter()
                .flat_map(|d| d.components())
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect();
            parts.push(
                p.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            parts
        })
        .collect();
    let mut depth = vec![1usize; paths.len()];
    loop {
        let names: Vec<String> = parts
            .iter()
            .zip(&depth)
            .map(|(p, &d)| p[p.len() - d..].join("/"))
            .collect();
        let mut first: HashMap<&str, usize> = HashMap::new();
        let mut clashing = vec![false; paths.len()];
        for (i, name) in names.iter().enumerate() {
            if let Some(&j) = first.get(name.as_str()) {
                clashing[i] = true;
                clashing[j] = true;
            } else {
                first.insert(name, i);
            }
        }
        let Some(clash) = clashing.iter().position(|&c| c) else {
            for (name, path) in names.iter().zip(paths) {
                if name.contains([',', '"', '\n', '\r']) {
                    return Err(TraceError::File {
                        path: path.clone(),
                        message: format!(
                            "the workload name {name:?} holds a comma, a quote or a line break, which the result CSVs cannot hold: rename the file"
                        ),
                    });
                }
            }
            return Ok(names);
        };
        let mut deeper = false;
        for (i, c) in clashing.iter().enumerate() {
            if *c && depth[i] < parts[i].len() {
                depth[i] += 1;
                deeper = true;
            }
        }
        if !deeper {
            let other = (clash + 1..paths.len())
                .find(|&j| names[j] == names[clash])
                .unwrap_or(clash);
            return Err(TraceError::File {
                path: paths[other].clone(),
                message: format!(
                    "the workload name {:?} is also {}'s, and no directory tells them apart: rename one",
                    parts[clash].last().map_or("", String::as_str),
                    paths[clash].display()
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(name: &str, text: &str) -> Result<NodeTrace, TraceError> {
        parse_nodes(Path::new(name), text)
    }

    fn pods(name: &str, text: &str) -> Result<PodTrace, TraceError> {
        parse_pods(Path::new(name), text)
    }

    #[test]
    fn reads_nodes_and_pods_as_the_simulator_does() {
        let nodes = nodes(
            "n.csv",
            "sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,2,P100\nb,32000,262144,0,\n",
        )
        .unwrap();
        assert_eq!(nodes.total_gpus(), 2);
        assert_eq!(&*nodes.nodes[1].model, "");
        assert_eq!(nodes.nodes[0].res().cards.as_slice(), &[1000, 1000]);
        let pods = pods(
            "dir/openb_pod_list_x.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n\
             p0,12000,16384,1,460,,LS\n\
             p1,4000,100,0,0,,BE\n\
             p2,8000,100,2,1500,V100M16||V100M32,LS\n\
             p3,0,100,0,700,G2,LS\n",
        )
        .unwrap();
        assert_eq!(pods.stem, "openb_pod_list_x");
        assert_eq!(pods.pods[0].res().milli, 460);
        assert_eq!(pods.pods[2].gpu_milli, 1000, "above 1000 is one card");
        assert_eq!(&*pods.pods[2].gpu_spec, "V100M16|V100M32");
        assert_eq!((pods.pods[3].gpu_milli, &*pods.pods[3].gpu_spec), (0, ""));
        assert_eq!(pods.pods[3].res().cpu, 100, "cpu 0 counts as 100m");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
        let cases = [
            (
                format!("{header}p0,1,1,1,1\np1,x,1,1,1\n"),
                "p.csv:3: field `cpu_milli`: expected a number, found \"x\"",
            ),
            (
                "name,cpu_milli\n".to_string(),
                "p.csv:1: no column `memory_mib` in the header",
            ),
            (
                format!("{header}p,1,1\n"),
                "p.csv:2: field `num_gpu`: missing (the line has 3 fields)",
            ),
            (
                format!("{header}p,9223372036854775808,1,1,1\n"),
                "p.csv:2: field `cpu_milli`: too large (out of range: at most 9223372036854775807), found \"9223372036854775808\"",
            ),
            (
                format!("{header}p,1e300,1,1,1\n"),
                "p.csv:2: field `cpu_milli`: too large (out of range: at most 9e15 written as a decimal), found \"1e300\"",
            ),
            (
                format!("{header}p,1,1,-99999999999999999999,1\n"),
                "p.csv:2: field `num_gpu`: expected a number not below 0, found \"-99999999999999999999\"",
            ),
            (
                format!("{header}p,1,1,9223372036854775807,1000\n"),
                "p.csv:2: field `num_gpu`: too large (out of range: 9223372036854775807 cards of 1000 milli-GPU are more than 9223372036854775807 milli-GPU)",
            ),
            (
                format!("{header}p0,1,1,1,1\np1,1,1,1,1\n\np0,2,2,2,2\n"),
                "p.csv:5: field `name`: task \"p0\" is also on line 2: names must be unique",
            ),
            (
                format!("{header} ,1,1,1,1\n"),
                "p.csv:2: field `name`: empty, expected the task's name",
            ),
            (header.to_string(), "p.csv: no tasks after the header line"),
            (
                "\n\n".to_string(),
                "p.csv:1: empty file, expected a header line",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(pods("p.csv", &text).unwrap_err().to_string(), want);
        }
        let header = "sn,cpu_milli,memory_mib,gpu,model\n";
        let cases = [
            (
                format!("{header}n,1,1,-2,T4\n"),
                "n.csv:2: field `gpu`: expected a number not below 0, found \"-2\"",
            ),
            (
                format!("{header}a,1,1,1,T4\na,1,1,1,T4\n"),
                "n.csv:3: field `sn`: node \"a\" is also on line 2: names must be unique",
            ),
            (header.to_string(), "n.csv: no nodes after the header line"),
        ];
        for (text, want) in cases {
            assert_eq!(nodes("n.csv", &text).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn workload_names_are_unique() {
        let names = |paths: &[&str]| {
            workload_names(&paths.iter().map(PathBuf::from).collect::<Vec<_>>())
                .map_err(|e| e.to_string())
        };
        // Stems alone when they differ: the published names.
        assert_eq!(
            names(&[
                "/d/openb_pod_list_default.csv",
                "/e/openb_pod_list_cpu250.csv"
            ])
            .unwrap(),
            ["openb_pod_list_default", "openb_pod_list_cpu250"]
        );
        // Alike stems under as many directories as tell them apart; the others as they are.
        assert_eq!(
            names(&["/r/x/trace.csv", "/r/y/trace.csv", "/r/x/other.csv"]).unwrap(),
            ["x/trace", "y/trace", "other"]
        );
        assert_eq!(
            names(&["/a/v1/t.csv", "/b/v1/t.csv", "/t.csv"]).unwrap(),
            ["a/v1/t", "b/v1/t", "t"]
        );
        assert_eq!(
            names(&["/x/t.csv", "/x/t.txt"]).unwrap_err(),
            "/x/t.txt: the workload name \"t\" is also /x/t.csv's, and no directory tells them apart: rename one"
        );
        assert_eq!(
            names(&["/x/a,b.csv"]).unwrap_err(),
            "/x/a,b.csv: the workload name \"a,b\" holds a comma, a quote or a line break, which the result CSVs cannot hold: rename the file"
        );
    }
}
