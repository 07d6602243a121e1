//! `treeline-bundle --brotli FILE...` writes `FILE.br` beside each file, for browsers
//! that accept brotli (the bundle goes out a tenth smaller than with gzip).
//!
//! `treeline-bundle WASM OUT_DIR NAME`: writes the browser bundle of a wasm linked
//! with `--emit-relocs` into OUT_DIR, as `wasm-bindgen --target web --no-typescript`
//! does after a split by route. wasm-bindgen's library alone builds in a third of
//! its CLI's time (no argument parser, test runner, web server or HTTP client), and
//! a fresh machine builds it before it can show a page.
//!
//! The lazy routes' code is cut out first into chunks the page loads when it needs
//! them: `split_*.wasm` and `chunk_*.wasm`, the JS that loads them, and the manifest
//! that tells the server which chunks a route needs, so its page can preload them.
//! Then `NAME.js` and `NAME_bg.wasm` are the main module's. The loader retries a
//! chunk whose download fails, and loads the page again when the server says its
//! chunks are from another build (`BUILD_FILE`).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use wasm_bindgen_cli_support::Bindgen;

/// The loader's module name: Leptos's server names this file in the preload links it
/// writes for a lazy route's page.
const LINK_NAME: &str = "./__wasm_split.______________________.js";
/// Where Leptos's server reads which chunks each lazy route needs.
const MANIFEST: &str = "__wasm_split_manifest.json";
/// The bundle's build id, which the server sends with every bundle file
/// (`x-treeline-build`) and the loader compares with its own.
const BUILD_FILE: &str = "treeline.build";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--version") {
        println!("treeline-bundle {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("--brotli") {
        for file in &args[1..] {
            if let Err(e) = brotli_copy(Path::new(file)) {
                eprintln!("treeline-bundle: {file}: {e:#}");
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    let [wasm, out_dir, name] = args.as_slice() else {
        eprintln!("usage: treeline-bundle WASM OUT_DIR NAME, or treeline-bundle --brotli FILE...");
        return ExitCode::from(2);
    };
    match bundle(Path::new(wasm), Path::new(out_dir), name) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("treeline-bundle: {wasm}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `FILE.br`, at brotli's best quality and a 4 MiB window: written once a build,
/// read by every browser.
fn brotli_copy(file: &Path) -> anyhow::Result<()> {
    let input = std::fs::read(file).context("reading it")?;
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(input.len() / 3);
    brotli::BrotliCompress(&mut input.as_slice(), &mut out, &params).context("compressing it")?;
    let mut name = file.as_os_str().to_owned();
    name.push(".br");
    std::fs::write(&name, out).context("writing its .br copy")
}

fn bundle(wasm: &Path, out_dir: &Path, name: &str) -> anyhow::Result<()> {
    let input = std::fs::read(wasm).context("reading the wasm")?;
    let main = out_dir.join(format!("{name}_main.wasm"));
    let main_module = format!("./{name}.js");
    let mut options = wasm_split_cli_support::Options::new(&input);
    options.output_dir = out_dir;
    options.main_out_path = &main;
    options.main_module = &main_module;
    options.link_name = LINK_NAME;
    let chunks = wasm_split_cli_support::transform(options)
        .map_err(|e| anyhow::anyhow!("splitting the wasm: {e:#}"))?;
    let manifest = serde_json::to_string_pretty(&chunks.prefetch_map)?;
    std::fs::write(out_dir.join(MANIFEST), manifest).context("writing the chunk manifest")?;
    // The chunks call the main module's functions by their linker names.
    Bindgen::new()
        .web(true)?
        .input_path(&main)
        .out_name(name)
        .typescript(false)
        .keep_lld_exports(true)
        .demangle(false)
        .generate(out_dir)?;
    std::fs::remove_file(&main)?;
    let build = build_id(&input);
    std::fs::write(out_dir.join(BUILD_FILE), &build).context("writing the build id")?;
    fetch_again(&out_dir.join(LINK_NAME.trim_start_matches("./")), &build)
}

/// The same wasm makes the same main module and chunks, so its hash names the build.
fn build_id(wasm: &[u8]) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    wasm.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// The loader's chunk downloads, each retried three times over 3.5 s: the splitter's
/// loader reports a failed download to the wasm, which panics, and the page stops
/// working (seen with a dropped request while a run was being opened).
///
/// A page left open across a redeploy would fetch the new build's chunk under the
/// old name and run it beside its old main module. When the server's build differs
/// from the loader's, the browser loads the page the reader was going to instead
/// (the router changes the URL only once the route's code has run, so the loader
/// remembers the link last followed). Once per build at most, so a server with a
/// stale id cannot make it loop.
fn fetch_again(loader: &Path, build: &str) -> anyhow::Result<()> {
    const FETCH: &str = "const src = fetch(";
    let js = std::fs::read_to_string(loader).context("reading the chunk loader")?;
    anyhow::ensure!(
        js.contains(FETCH),
        "the chunk loader has no `{FETCH}`: the splitter's output changed, see fetch_again"
    );
    let js = js.replace(FETCH, "const src = fetchAgain(")
        + &format!("\nconst BUILD = \"{build}\";\n")
        + r#"
async function fetchAgain(url) {
    for (const wait of [500, 1000, 2000]) {
        let response;
        try {
            response = await fetch(url);
        } catch (e) {
            console.warn(`fetching ${url} failed (${e}); trying again`);
        }
        if (response?.ok) return sameBuild(response);
        await new Promise((resolve) => setTimeout(resolve, wait));
    }
    return sameBuild(await fetch(url));
}

let followed;
document.addEventListener("click", (event) => {
    if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    const link = event.target.closest?.("a[href]");
    if (link && link.origin === location.origin) followed = { href: link.href, at: Date.now() };
}, true);

function sameBuild(response) {
    const served = response.headers.get("x-treeline-build");
    if (!served || served === BUILD) return response;
    const key = "treeline-reloaded-for-build";
    try {
        if (sessionStorage.getItem(key) !== served) {
            sessionStorage.setItem(key, served);
            if (followed && Date.now() - followed.at < 10000) location.assign(followed.href);
            else location.reload();
            return new Promise(() => {});
        }
    } catch (e) {
        console.warn(`no session storage (${e}), so no reload`);
    }
    throw new Error(`${response.url} is from build ${served}, this page from ${BUILD}: reload the page`);
}
"#;
    std::fs::write(loader, js).context("writing the chunk loader")
}
