//! `gantry record`: a cluster's history written as a trace ([`gantry_api::trace`]) for
//! `gantry simulate --trace` to replay. Every kind the scheduler reads is listed (in
//! pages, as [`crate::import`] lists it) and written as the state at the start; then
//! each kind is watched from its list's resourceVersion, and every change is written
//! with its time. A watch that ends is resumed from the last resourceVersion seen; one
//! the server can no longer resume (`410 Gone`) is relisted, and what changed while it
//! was blind is written as changes (objects new, changed or gone since), so the trace
//! has no gap. Objects are redacted ([`gantry_api::trace::redact`]) before they are
//! written. Memory holds one name and resourceVersion per object, not the objects.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use gantry_api::trace::{FORMAT_VERSION, Op, TraceHeader, TraceRecord, TraceWriter, redact};
use kube::Client;
use kube::core::WatchEvent;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::failure::Refused;
use crate::import::{self, ImportOptions, KINDS, ListedKind, TAINT_RULE_KINDS};

/// How long a watch may keep failing before recording ends with an error, by default.
pub const MAX_WATCH_OUTAGE: Duration = Duration::from_secs(300);

/// How a recording runs.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// How the lists page and retry.
    pub lists: ImportOptions,
    /// A progress line this often (on the `progress` callback).
    pub progress_every: Duration,
    /// The longest wait between attempts to resume a failing watch.
    pub max_backoff: Duration,
    /// How long a watch may keep failing before recording ends with an error.
    pub max_outage: Duration,
}

impl Default for RecordOptions {
    fn default() -> RecordOptions {
        RecordOptions {
            lists: ImportOptions::default(),
            progress_every: Duration::from_secs(10),
            max_backoff: Duration::from_secs(30),
            max_outage: MAX_WATCH_OUTAGE,
        }
    }
}

/// What a recording wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Objects in the state at the start.
    pub listed: u64,
    /// Changes after it.
    pub changes: u64,
    /// Of those, written from a relist's differences after a watch could not resume.
    pub from_relists: u64,
    /// Relists made.
    pub relists: u64,
    /// Milliseconds recorded.
    pub duration_ms: u64,
}

/// One watched kind's change, as it reaches the writer.
enum Change {
    Event {
        kind: usize,
        op: Op,
        object: Value,
    },
    /// A watch could not resume: relist the kind.
    Expired {
        kind: usize,
    },
    /// A watch kept failing past [`RecordOptions::max_outage`].
    Failed(String),
}

/// What the recorder knows of one kind: each object's `namespace/name` and
/// resourceVersion, and how the kind's objects are named (from its list).
#[derive(Default)]
struct KnownKind {
    versions: HashMap<String, String>,
    kind: String,
    api_version: String,
}

/// Records `server` into `output` until `stop` resolves. `server_version` goes into the
/// header; `progress` is called with a line now and then.
pub async fn record<W: Write>(
    client: &Client,
    server: &str,
    server_version: Option<String>,
    output: W,
    options: &RecordOptions,
    stop: impl std::future::Future<Output = ()>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<(W, Recorded), String> {
    let header = TraceHeader {
        gantry_trace: FORMAT_VERSION,
        server: server.to_string(),
        server_version,
        started: crate::writes::now_rfc3339(),
    };
    let mut writer = TraceWriter::new(output, &header).map_err(io_error)?;
    let started = Instant::now();
    let mut recorded = Recorded::default();
    let mut known: Vec<Option<KnownKind>> = Vec::new();
    let (sender, mut changes) = mpsc::channel(1024);
    let mut watches: Vec<Option<tokio::task::JoinHandle<()>>> = Vec::new();
    // Every kind of KINDS, then DeviceTaintRules in the first version served (each
    // version lists the same rules).
    let mut kinds: Vec<ListedKind> = Vec::new();
    let mut rules_served = false;
    for kind in KINDS.into_iter().chain(TAINT_RULE_KINDS) {
        let is_rule = TAINT_RULE_KINDS.iter().any(|k| k.path == kind.path);
        if is_rule && rules_served {
            continue;
        }
        let index = kinds.len();
        kinds.push(kind);
        let listed = list(
            client,
            server,
            kind,
            &options.lists,
            &mut writer,
            started,
            None,
        )
        .await
        .map_err(|refused| listing_failed(server, kind, refused))?;
        match listed {
            Some((state, version)) => {
                rules_served |= is_rule;
                recorded.listed += state.versions.len() as u64;
                known.push(Some(state));
                let watch = watch(
                    client.clone(),
                    kind,
                    index,
                    version,
                    options.max_backoff,
                    options.max_outage,
                    sender.clone(),
                );
                watches.push(Some(tokio::spawn(watch)));
            }
            None => {
                known.push(None);
                watches.push(None);
            }
        }
    }
    progress(&format!(
        "recording {server}: {} objects at the start",
        recorded.listed
    ));
    tokio::pin!(stop);
    let mut ticker = tokio::time::interval(options.progress_every);
    ticker.tick().await;
    let outcome = loop {
        tokio::select! {
            () = &mut stop => break Ok(()),
            _ = ticker.tick() => progress(&format!(
                "recording {server}: {} changes in {} s ({} relists)",
                recorded.changes,
                started.elapsed().as_secs(),
                recorded.relists
            )),
            change = changes.recv() => match change {
                None => break Ok(()),
                Some(Change::Failed(message)) => break Err(message),
                Some(Change::Event { kind, op, object }) => {
                    let Some(state) = known[kind].as_mut() else { continue };
                    note(&mut state.versions, op, &object);
                    write(&mut writer, started, op, object).map_err(io_error)?;
                    recorded.changes += 1;
                }
                Some(Change::Expired { kind: index }) => {
                    recorded.relists += 1;
                    let before = writer.records();
                    let old = known[index].take().unwrap_or_default();
                    let kind = kinds[index];
                    let relisted = list(client, server, kind, &options.lists, &mut writer, started, Some(old))
                        .await
                        .map_err(|refused| listing_failed(server, kind, refused))?;
                    let written = writer.records() - before;
                    recorded.changes += written;
                    recorded.from_relists += written;
                    if let Some((state, version)) = relisted {
                        known[index] = Some(state);
                        let (backoff, outage) = (options.max_backoff, options.max_outage);
                        let watch = watch(client.clone(), kind, index, version, backoff, outage, sender.clone());
                        watches[index] = Some(tokio::spawn(watch));
                    }
                }
            },
        }
    };
    for watch in watches.iter().flatten() {
        watch.abort();
    }
    recorded.duration_ms = started.elapsed().as_millis() as u64;
    let output = writer.finish(recorded.duration_ms).map_err(io_error)?;
    outcome.map(|()| (output, recorded))
}

fn io_error(e: std::io::Error) -> String {
    format!("cannot write the trace: {e}")
}

fn listing_failed(server: &str, kind: ListedKind, refused: Refused) -> String {
    if import::code(&refused) == Some(410) {
        return format!(
            "listing {}: {server} expired the list's continue token (410) before its last page: it keeps a list's snapshot for about five minutes; record again",
            kind.resource
        );
    }
    import::refusal_line(server, kind, refused)
}

/// Lists `kind` and writes its objects: all of them as the state at the start
/// (`previous` is `None`), or, relisting after a watch could not resume, only how they
/// differ from `previous` (added, modified, and deleted for those gone). `None` when
/// the server does not serve an optional kind.
async fn list<W: Write>(
    client: &Client,
    server: &str,
    kind: ListedKind,
    options: &ImportOptions,
    writer: &mut TraceWriter<W>,
    started: Instant,
    mut previous: Option<KnownKind>,
) -> Result<Option<(KnownKind, String)>, Refused> {
    let mut state = KnownKind::default();
    let mut version = String::new();
    let paged = import::each_page(client, server, kind, options, |text, _| {
        let page: Value = serde_json::from_slice(text).map_err(|e| Refused {
            message: format!(
                "{server} answered a list of {} that is not JSON: {e}",
                kind.resource
            ),
            status: None,
        })?;
        let field = |path: &str| {
            page.pointer(path)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        state.kind = kind.kind.to_string();
        state.api_version = kind.api_version().to_string();
        version = field("/metadata/resourceVersion").to_string();
        let next = Some(field("/metadata/continue"))
            .filter(|c| !c.is_empty())
            .map(String::from);
        let items = page.get("items").and_then(Value::as_array);
        for (i, mut item) in items.cloned().unwrap_or_default().into_iter().enumerate() {
            if !stamp(&mut item, kind) {
                return Err(Refused {
                    message: format!(
                        "{server} answered a list of {} whose items[{i}] is not an object",
                        kind.resource
                    ),
                    status: None,
                });
            }
            let key = key_of(&item);
            let item_version = item
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let op = match previous.as_mut().map(|p| p.versions.remove(&key)) {
                None => Some(Op::List),
                Some(None) => Some(Op::Added),
                Some(Some(seen)) if seen != item_version => Some(Op::Modified),
                Some(Some(_)) => None,
            };
            state.versions.insert(key, item_version);
            if let Some(op) = op {
                write(writer, started, op, item).map_err(|e| Refused {
                    message: io_error(e),
                    status: None,
                })?;
            }
        }
        Ok(next)
    })
    .await;
    match paged {
        Ok(()) => {}
        Err(refused) if kind.optional && import::code(&refused) == Some(404) => return Ok(None),
        Err(refused) => return Err(refused),
    }
    for key in previous.map(|p| p.versions).unwrap_or_default().into_keys() {
        let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
        let mut gone = json!({"kind": state.kind, "apiVersion": state.api_version, "metadata": {"name": name}});
        if !namespace.is_empty() {
            gone["metadata"]["namespace"] = json!(namespace);
        }
        write(writer, started, Op::Deleted, gone).map_err(|e| Refused {
            message: io_error(e),
            status: None,
        })?;
    }
    Ok(Some((state, version)))
}

/// Watches `kind` from `version` until the watch cannot resume (then asks for a relist)
/// or keeps failing past `options.max_outage`; a watch the server closes is resumed
/// from the last resourceVersion seen (bookmarks included).
async fn watch(
    client: Client,
    kind: ListedKind,
    index: usize,
    mut version: String,
    max_backoff: Duration,
    max_outage: Duration,
    sender: mpsc::Sender<Change>,
) {
    let first_backoff = Duration::from_secs(1).min(max_backoff);
    let mut backoff = first_backoff;
    let mut failing_since: Option<Instant> = None;
    loop {
        let mut query = format!(
            "watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion={}",
            import::percent_encode(&version)
        );
        if let Some(selector) = kind.field_selector {
            query += &format!("&fieldSelector={}", import::percent_encode(selector));
        }
        let request = http::Request::get(format!("{}?{query}", kind.path))
            .body(Vec::new())
            .expect("a GET with a path and a query is a request");
        let mut received = false;
        let failure = match client.request_events::<Value>(request).await {
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                let ended = loop {
                    let event = match stream.try_next().await {
                        Ok(Some(event)) => event,
                        Ok(None) => break None,
                        Err(e) => break Some(e.to_string()),
                    };
                    let (op, mut object) = match event {
                        WatchEvent::Added(object) => (Op::Added, object),
                        WatchEvent::Modified(object) => (Op::Modified, object),
                        WatchEvent::Deleted(object) => (Op::Deleted, object),
                        WatchEvent::Bookmark(bookmark) => {
                            received = true;
                            version = bookmark.metadata.resource_version;
                            continue;
                        }
                        WatchEvent::Error(status) if status.code == 410 => {
                            let _ = sender.send(Change::Expired { kind: index }).await;
                            return;
                        }
                        WatchEvent::Error(status) => break Some(status.message.clone()),
                    };
                    if !stamp(&mut object, kind) {
                        break Some(format!(
                            "it sent a {op:?} event whose object is not an object"
                        ));
                    }
                    // Only a usable event counts as progress against the outage limit.
                    received = true;
                    if let Some(v) = object
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                    {
                        version = v.to_string();
                    }
                    if sender
                        .send(Change::Event {
                            kind: index,
                            op,
                            object,
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                };
                if received || ended.is_none() {
                    failing_since = None;
                    backoff = first_backoff;
                }
                ended
            }
            Err(kube::Error::Api(status)) if status.code == 410 => {
                let _ = sender.send(Change::Expired { kind: index }).await;
                return;
            }
            Err(e) => Some(e.to_string()),
        };
        let Some(failure) = failure else {
            // Closed by the server: resumed at once after events, after a pause after
            // none (a server closing every watch at once is not asked without pause).
            if !received {
                tokio::time::sleep(first_backoff).await;
            }
            continue;
        };
        let since = *failing_since.get_or_insert_with(Instant::now);
        if since.elapsed() > max_outage {
            let message = format!(
                "the watch of {} kept failing for {:.1} s: {failure}",
                kind.resource,
                max_outage.as_secs_f64()
            );
            let _ = sender.send(Change::Failed(message)).await;
            return;
        }
        tracing::warn!(
            "the watch of {} failed ({failure}); resuming in {} s",
            kind.resource,
            backoff.as_secs_f64()
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(max_backoff);
    }
}

/// Names `object` as of the kind listed or watched, not as the server named it (a Pod is
/// redacted as a Pod whatever a server calls it). False if it is not an object.
fn stamp(object: &mut Value, kind: ListedKind) -> bool {
    let Some(fields) = object.as_object_mut() else {
        return false;
    };
    fields.insert("kind".into(), json!(kind.kind));
    fields.insert("apiVersion".into(), json!(kind.api_version()));
    true
}

/// Keeps the resourceVersion of an object added or modified; forgets a deleted one.
fn note(versions: &mut HashMap<String, String>, op: Op, object: &Value) {
    let key = key_of(object);
    match op {
        Op::Deleted => {
            versions.remove(&key);
        }
        _ => {
            let version = object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            versions.insert(key, version.unwrap_or_default().to_string());
        }
    }
}

/// Writes one object, redacted, at the time elapsed since `started`.
fn write<W: Write>(
    writer: &mut TraceWriter<W>,
    started: Instant,
    op: Op,
    mut object: Value,
) -> std::io::Result<()> {
    redact(&mut object);
    let at = if op == Op::List {
        0
    } else {
        started.elapsed().as_millis() as u64
    };
    writer.write(TraceRecord::change(at, op, object))
}

fn key_of(object: &Value) -> String {
    let field = |f: &str| {
        object
            .pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    format!("{}/{}", field("namespace"), field("name"))
}
