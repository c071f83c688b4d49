// The official openai SDK doing what `tokterm batch --concurrency N` does: every line of a
// JSON-lines file ({"id", "prompt"}) as one streamed chat completion, N in flight at once
// (a pool of N workers), one JSON line per answer on stdout in order of completion.
// usage: node sdk.mjs IN.jsonl N      (OPENAI_BASE_URL points at the server)
import fs from 'node:fs';
import OpenAI from 'openai';

const [inFile, nArg] = process.argv.slice(2);
const concurrency = parseInt(nArg || '32', 10);
const items = fs.readFileSync(inFile, 'utf8').split('\n').filter((l) => l.trim())
  .map((l) => JSON.parse(l));
const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: 'sk-bench-not-a-key' });

const t0 = performance.now();
let next = 0;
let failed = 0;
async function worker() {
  while (next < items.length) {
    const it = items[next++];
    let content = '';
    let usage = null;
    let error = null;
    try {
      const stream = await client.chat.completions.create({
        model: it.model || 'gpt-4o-mini',
        messages: [{ role: 'user', content: it.prompt }],
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const chunk of stream) {
        const d = chunk.choices[0]?.delta?.content;
        if (d) content += d;
        if (chunk.usage) usage = chunk.usage;
      }
    } catch (e) {
      error = String(e.message || e);
      failed++;
    }
    process.stdout.write(JSON.stringify({ id: it.id, content, usage, error }) + '\n');
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
// Like tokterm batch's summary: the run itself, without the process start-up.
process.stderr.write(`sdk batch: ${items.length} items; ${((performance.now() - t0) / 1000).toFixed(3)} s\n`);
process.exitCode = failed ? 3 : 0;
