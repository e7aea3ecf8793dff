/**
 * Tracing your own code: `trace()` for functions, `@traced()` for methods (standard TC39
 * decorators), a streamed model reply turned into one output with `reduce` (a generator, and a web
 * ReadableStream), and `withThread` to group the calls of a conversation.
 *
 * Sends to CALLBRIDGE_BASE_URL (default: a local server on port 6345, such as
 * `callbridge serve --user dev:pw`) with CALLBRIDGE_USERNAME/CALLBRIDGE_PASSWORD or an API key.
 * Compile, then run (README, "Examples").
 */
import { register, setCallAttributes, trace, traced, withThread } from 'callbridge';

// Once, at start-up: a tracer provider whose spans become calls in the service.
const tracing = register({ projectId: process.env.CALLBRIDGE_PROJECT ?? 'acme/recipes' });

interface Recipe {
  readonly title: string;
  readonly minutes: number;
}

// A function: one call per invocation, inputs recorded by parameter name: { query } below, and
// `limit` too when a caller passes it (an argument left to its default is not recorded).
const searchRecipes = trace(
  async function searchRecipes(query: string, limit = 2): Promise<Recipe[]> {
    const all: Recipe[] = [
      { title: 'Tomato soup', minutes: 30 },
      { title: 'Tomato tart', minutes: 55 },
      { title: 'Green salad', minutes: 10 },
    ];
    return all.filter((recipe) => recipe.title.toLowerCase().includes(query)).slice(0, limit);
  },
  { kind: 'tool' },
);

// A stream: the call stays open until the caller has read it all; `reduce` builds its output
// from the chunks (here the whole text instead of the list of words).
const streamAdvice = trace(
  async function* streamAdvice(recipes: Recipe[]): AsyncGenerator<string> {
    const quickest = [...recipes].sort((a, b) => a.minutes - b.minutes)[0];
    const text = quickest ? `Try the ${quickest.title}: ready in ${quickest.minutes} minutes.` : 'Nothing found.';
    for (const word of text.split(' ')) yield `${word} `;
  },
  { kind: 'llm', reduce: (chunks) => chunks.join('').trim() },
);

// A web ReadableStream (what `fetch` bodies, the AI SDK's text streams and LangChain's `.stream()`
// give): the caller gets that same stream, and the call ends when it has been read, however it is
// read (a reader, for await, pipeThrough, a Response...).
const streamRecipeCard = trace(
  function streamRecipeCard(recipe: Recipe): ReadableStream<string> {
    const parts = [`${recipe.title}: `, `${recipe.minutes} minutes, `, 'serves two.'];
    return new ReadableStream<string>({
      pull: (controller) => (parts.length > 0 ? controller.enqueue(parts.shift()!) : controller.close()),
    });
  },
  { kind: 'llm', reduce: (chunks) => chunks.join('') },
);

class Chef {
  constructor(private readonly kitchen: string) {}

  // Methods: the call is named after the method unless `name` says otherwise.
  @traced({ kind: 'agent' })
  async suggest(question: string): Promise<string> {
    setCallAttributes({ kitchen: this.kitchen }); // shows in the call's `attributes`
    const recipes = await searchRecipes(question.toLowerCase());
    let advice = '';
    for await (const chunk of streamAdvice(recipes)) advice += chunk;
    return advice.trim();
  }

  @traced({ name: 'chef.rate', displayName: 'Rate a dish' })
  rate(dish: string, stars: number): { dish: string; stars: number } {
    if (stars < 1 || stars > 5) throw new RangeError(`stars must be 1 to 5, got ${stars}`); // recorded, re-thrown
    return { dish, stars };
  }
}

const chef = new Chef('home');
// Each traced call made directly inside withThread is a turn of the conversation `dinner-42`.
await withThread('dinner-42', async () => {
  console.log(await chef.suggest('Tomato'));
  console.log(chef.rate('Tomato soup', 5));
});

let card = '';
for await (const part of streamRecipeCard({ title: 'Green salad', minutes: 10 })) card += part;
console.log(card);

// Optional in a script (register() flushes before the process exits), required in tests.
await tracing.shutdown();
console.log(tracing.exporter.stats());
