"""A CartPole policy-gradient loop in pure Python, traced with Treeline.

Every episode logs its return and loss as metrics; every `--trace-every`-th episode is
traced whole: the rollout root, one env_step span per step with the policy call (model)
and the reward scoring beneath it, plus evaluation, checkpoints and the odd flaky
environment reset that is retried. Run a server first (`treeline serve`), then:

    python examples/cartpole_rl.py --episodes 300
"""

import argparse
import math
import random

import treeline as tl


class CartPole:
    """The classic cart-pole balance task (same physics as the usual benchmark)."""

    gravity, cart_mass, pole_mass, half_length, force, dt = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    max_steps = 500

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.failures_left = 0

    def reset(self):
        if self.rng.random() < 0.05:  # a simulator worker that sometimes times out
            raise TimeoutError("simulator worker did not answer in 2.0 s")
        self.state = [self.rng.uniform(-0.05, 0.05) for _ in range(4)]
        self.t = 0
        return list(self.state)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force if action == 1 else -self.force
        total = self.cart_mass + self.pole_mass
        pml = self.pole_mass * self.half_length
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + pml * theta_dot ** 2 * sin) / total
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.half_length * (4.0 / 3.0 - self.pole_mass * cos ** 2 / total))
        x_acc = temp - pml * theta_acc * cos / total
        x, x_dot = x + self.dt * x_dot, x_dot + self.dt * x_acc
        theta, theta_dot = theta + self.dt * theta_dot, theta_dot + self.dt * theta_acc
        self.state = [x, x_dot, theta, theta_dot]
        self.t += 1
        fell = abs(x) > 2.4 or abs(theta) > 12 * math.pi / 180
        return list(self.state), 1.0, fell, self.t >= self.max_steps


class Policy:
    """A logistic policy over the four observations, trained with REINFORCE."""

    def __init__(self, seed, lr):
        rng = random.Random(seed)
        self.w = [rng.gauss(0, 0.1) for _ in range(4)]
        self.lr = lr

    def prob_right(self, obs):
        z = sum(w * o for w, o in zip(self.w, obs))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def act(self, obs, rng, greedy=False):
        p = self.prob_right(obs)
        action = int(p > 0.5) if greedy else int(rng.random() < p)
        return action, p

    def update(self, trajectory, gamma=0.99):
        returns, g = [], 0.0
        for _, _, r in reversed(trajectory):
            g = r + gamma * g
            returns.append(g)
        returns.reverse()
        mean = sum(returns) / len(returns)
        std = math.sqrt(sum((g - mean) ** 2 for g in returns) / len(returns)) or 1.0
        loss = 0.0
        for (obs, action, _), g in zip(trajectory, returns):
            adv = (g - mean) / std
            p = self.prob_right(obs)
            grad = (action - p)  # d log pi(action) / dz
            loss -= adv * math.log(max(1e-8, p if action else 1 - p))
            for i in range(4):
                self.w[i] += self.lr * adv * grad * obs[i]
        return loss / len(trajectory)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--trace-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--url", default=None, help="server URL (default: $TREELINE_URL)")
    args = parser.parse_args()

    random.seed(args.seed)  # the SDK's ids do not depend on the global generator
    rng = random.Random(args.seed)
    env, policy = CartPole(args.seed), Policy(args.seed, args.lr)
    run = tl.init("cartpole", name="reinforce-seed-%d" % args.seed, url=args.url,
                  config={"algorithm": "reinforce", "env": "CartPole", "seed": args.seed,
                          "lr": args.lr, "episodes": args.episodes})

    @run.trace_op(name="reward.score", kind="reward")
    def score(obs, fell):
        # Shaped reward: the usual +1, minus a small penalty for leaning far.
        return 1.0 - 0.1 * abs(obs[2]) * 10 - (1.0 if fell else 0.0)

    def reset_with_retry(parent):
        for attempt in range(3):
            try:
                with parent.span("env.reset", kind="system", attributes={"attempt": attempt}):
                    return env.reset()
            except TimeoutError:
                continue
        raise RuntimeError("environment would not reset")

    def rollout(episode, traced, greedy=False):
        name = ("eval" if greedy else "rollout") + " episode %d" % episode
        root = run.trace(name, kind="evaluator" if greedy else "rollout", step=episode,
                         capture="preview",
                         attributes={"env": "CartPole", "rollout_id": "ep-%d" % episode,
                                     "greedy": greedy}) if traced else tl.NoopSpan()
        with root:
            obs = reset_with_retry(root)
            trajectory, total, shaped = [], 0.0, 0.0
            while True:
                with root.span("env.step %d" % env.t, kind="env_step") as step_span:
                    with step_span.model("policy.forward", inputs={"observation": obs}) as call:
                        action, p = policy.act(obs, rng, greedy)
                        call.set_output({"action": action, "p_right": round(p, 4)})
                    next_obs, reward, fell, done = env.step(action)
                    shaped += score(next_obs, fell) if traced else 0.0
                    step_span.log_metric("reward", reward)
                trajectory.append((obs, action, reward))
                total += reward
                obs = next_obs
                if fell or done:
                    break
            root.set_attributes({"episode_return": total, "steps": len(trajectory),
                                 "terminated": fell})
            root.log_metric("shaped_return", shaped)
            root.set_output({"return": total, "steps": len(trajectory)})
        return trajectory, total

    best = 0.0
    for episode in range(args.episodes):
        with tl.step(episode):
            traced = episode % args.trace_every == 0
            try:
                trajectory, total = rollout(episode, traced)
            except RuntimeError:
                continue
            with run.span("policy.update", kind="custom") if traced else tl.NoopSpan():
                loss = policy.update(trajectory)
            metrics = {"train/episode_return": total, "train/policy_loss": loss,
                       "train/episode_length": len(trajectory)}
            if episode % 25 == 0:
                _, eval_return = rollout(episode, traced=True, greedy=True)
                metrics["eval/return"] = eval_return
                if eval_return >= best:
                    best = eval_return
                    with run.trace("checkpoint", kind="checkpoint", step=episode,
                                   attributes={"eval_return": eval_return}) as ckpt:
                        ckpt.set_attribute("weights", ["%.4f" % w for w in policy.w])
            run.log_metrics(metrics)
        if episode % 50 == 0:
            print("episode %4d  return %6.1f  best eval %6.1f" % (episode, total, best))
    run.finish()
    lost = {k: v for k, v in run.counters().items() if v and k != "blocked_seconds"}
    print("run %s finished (%s); open it in the Treeline dashboard"
          % (run.run_id, "lost: %s" % lost if lost else "nothing lost"))


if __name__ == "__main__":
    main()
