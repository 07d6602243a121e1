import { test, expect } from "./fixtures";

const WASM_MAGIC = Buffer.from([0x00, 0x61, 0x73, 0x6d]);

// A browser that accepts gzip is sent the bundle's gzipped copy, about a third of
// its size; one that does not still gets the bundle itself.
test("the browser bundle is sent gzipped to a browser that accepts it", async ({ request }) => {
  const plain = await request.get("/pkg/treeline_bg.wasm", {
    headers: { "Accept-Encoding": "identity" },
  });
  expect(plain.status()).toBe(200);
  expect(plain.headers()["content-encoding"]).toBeUndefined();
  const raw = await plain.body();
  expect(raw.subarray(0, 4)).toEqual(WASM_MAGIC);

  const packed = await request.get("/pkg/treeline_bg.wasm", {
    headers: { "Accept-Encoding": "gzip" },
  });
  expect(packed.status()).toBe(200);
  expect(packed.headers()["content-encoding"]).toBe("gzip");
  expect(packed.headers()["content-type"]).toBe("application/wasm");
  // A shared cache keeps the two apart.
  expect(packed.headers()["vary"]).toContain("accept-encoding");
  const sent = Number(packed.headers()["content-length"]);
  expect(sent).toBeLessThan(raw.length / 2);
  // The client inflates it back to the same bundle.
  expect(await packed.body()).toEqual(raw);

  for (const file of ["/pkg/treeline.js", "/pkg/treeline.css"]) {
    const r = await request.get(file, { headers: { "Accept-Encoding": "gzip" } });
    expect(r.headers()["content-encoding"], file).toBe("gzip");
  }
});
