"""A tool-using agent loop, traced with Treeline (no model or network needed).

A scripted "LLM" plans with tool calls (calculator, corpus search, a flaky weather
API), a verifier sub-agent checks the answer, and each task becomes one trace:
agent root > iteration > thought / model call / tool call. Tasks of a training step
run concurrently with asyncio, and each nests correctly on its own. Run a server first
(`treeline serve`), then:

    python examples/agent_loop.py --steps 5
"""

import argparse
import asyncio
import json
import random
import re

import treeline as tl

CORPUS = {
    "selfish gene": "The Selfish Gene (1976) was written by Richard Dawkins.",
    "spiders": "Spiders have eight legs and most have eight eyes.",
    "cartpole": "CartPole balances a pole on a cart; an episode ends when it tips past 12 degrees.",
    "rust": "Rust 1.0 was released in May 2015.",
}
TASKS = [
    ("What is 17 * 23?", "391"),
    ("Who wrote The Selfish Gene?", "Richard Dawkins"),
    ("How many legs do spiders have?", "eight"),
    ("What is the weather in Paris?", "sunny"),
    ("What is (12 + 30) / 7?", "6"),
    ("When was Rust 1.0 released?", "May 2015"),
]


def tokens(text):
    return max(1, len(str(text)) // 4)


class ScriptedLLM:
    """Stands in for a chat model: reads the conversation, answers with a tool call or
    a final answer, and sometimes makes a mistake a verifier has to catch."""

    def __init__(self, rng):
        self.rng = rng

    async def complete(self, messages):
        await asyncio.sleep(self.rng.uniform(0.001, 0.01))
        question = messages[1]["content"]
        observations = [m["content"] for m in messages if m["role"] == "tool"]
        if observations:
            answer = observations[-1]
            if self.rng.random() < 0.15:
                answer = "I am not sure."  # a hallucinated give-up
            return {"role": "assistant", "content": answer}
        if re.search(r"[\d)]\s*[-+*/]\s*[\d(]", question):
            expr = re.sub(r"[^0-9+\-*/(). ]", "", question).strip()
            return {"role": "assistant", "tool_call": {"name": "calculator", "args": {"expression": expr}}}
        if "weather" in question.lower():
            city = question.rstrip("?").split()[-1]
            return {"role": "assistant", "tool_call": {"name": "weather", "args": {"city": city}}}
        return {"role": "assistant", "tool_call": {"name": "search", "args": {"query": question}}}


async def run_tool(name, args, rng):
    await asyncio.sleep(rng.uniform(0.001, 0.005))
    if name == "calculator":
        value = eval(args["expression"], {"__builtins__": {}})  # the expression is ours
        return str(int(value) if float(value).is_integer() else round(value, 3))
    if name == "weather":
        if rng.random() < 0.3:
            raise ConnectionError("weather API timed out (Authorization: Bearer wx-abcdef123456)")
        return "sunny, 21 C in %s" % args["city"]
    hits = [text for key, text in CORPUS.items() if key in args["query"].lower()]
    return hits[0] if hits else "no results"


async def solve(run, llm, rng, step, index, question, expected):
    system = {"role": "system", "content": "Answer with tools. api_key=sk-demo-abcdefghijkl"}
    messages = [system, {"role": "user", "content": question}]
    with tl.attributes({"sample_index": index}), \
            run.trace("task %d: %s" % (index, question), kind="agent", step=step,
                      capture="preview", inputs={"question": question},
                      attributes={"rollout_id": "s%d-t%d" % (step, index)}) as task:
        answer = None
        for turn in range(4):
            with task.iteration(inputs={"turn": turn}) as it:
                it.thought(text="Turn %d: %s" % (turn, "use the observation" if turn else
                                                 "pick a tool for: " + question)).end()
                with it.model("policy", prompt=list(messages),
                              attributes={"model": "scripted-7b", "temperature": 0.2}) as call:
                    reply = await llm.complete(messages)
                    call.completion(reply)
                    call.token_count = tokens(messages) + tokens(reply)
                messages.append(reply)
                if "tool_call" not in reply:
                    answer = reply["content"]
                    it.set_output({"answer": answer})
                    break
                name, args = reply["tool_call"]["name"], reply["tool_call"]["args"]
                with it.tool(name, inputs=args) as tool_span:
                    try:
                        observation = await run_tool(name, args, rng)
                        tool_span.set_output(observation)
                    except ConnectionError as exc:
                        tool_span.record_exception(exc).set_status("error")
                        observation = "error: " + str(exc)
                messages.append({"role": "tool", "content": observation})
        with task.agent("verifier", inputs={"answer": answer, "expected": expected}) as verifier:
            with verifier.model("judge", prompt=[{"role": "user", "content": "Is %r right?" % answer}]) as judge:
                await asyncio.sleep(0.001)
                correct = answer is not None and expected.lower() in answer.lower()
                judge.completion({"verdict": "correct" if correct else "wrong"})
                judge.token_count = 12
            verifier.set_output({"correct": correct})
        reward = 1.0 if correct else 0.0
        task.set_attributes({"reward": reward, "turns": turn + 1})
        task.final_output({"answer": answer, "messages": messages})
        return reward


async def training_step(run, llm, rng, step, batch):
    tasks = [solve(run, llm, rng, step, i, q, a) for i, (q, a) in enumerate(batch)]
    return await asyncio.gather(*tasks)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--url", default=None, help="server URL (default: $TREELINE_URL)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    llm = ScriptedLLM(rng)
    run = tl.init("agents", name="scripted-agent-seed-%d" % args.seed, url=args.url,
                  config={"model": "scripted-7b", "tools": ["calculator", "search", "weather"],
                          "openai_api_key": "sk-should-never-be-stored"})
    for step in range(args.steps):
        with tl.step(step):
            batch = rng.sample(TASKS, 4)
            rewards = asyncio.run(training_step(run, llm, rng, step, batch))
            mean = sum(rewards) / len(rewards)
            run.log_metrics({"reward/mean": mean, "reward/min": min(rewards)})
        print("step %d  mean reward %.2f" % (step, mean))
    run.finish()
    lost = {k: v for k, v in run.counters().items() if v and k != "blocked_seconds"}
    print("run %s finished; %s; %s" % (run.run_id, json.dumps({"traces": args.steps * 4}),
                                       "lost: %s" % lost if lost else "nothing lost"))


if __name__ == "__main__":
    main()
