// The official openai SDK streaming one chat completion and printing each delta to stdout.
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: 'sk-bench-not-a-key' });
const stream = await client.chat.completions.create({
  model: 'bench',
  messages: [{ role: 'user', content: 'x' }],
  stream: true,
});
for await (const chunk of stream) {
  const d = chunk.choices[0]?.delta?.content;
  if (d) process.stdout.write(d);
}
process.stdout.write('\n');
