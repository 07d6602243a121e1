//! The RL runs: PPO on CartPole (500 steps, a failure stretch that lines up with a dip
//! in the return), and a LunarLander run preempted with spans still open.

use serde_json::{json, Value};
use treeline_wire::{MetricPoint, RunFinish, RunStatus, RunUpsert};

use super::rng::{round, Rng};
use super::trace::{error, none, TraceWriter, MS, SEC};
use super::{Chunks, Ctx, RunPlan};

pub(super) const PPO_RUN: &str = "demo-ppo-cartpole";
pub(super) const INTERRUPTED_RUN: &str = "demo-interrupted";
const PROJECT: &str = "demo-rl";

const PPO_STEPS: i64 = 500;
/// Steps whose rollouts fail: the simulator diverges and episodes abort early.
pub(super) const INCIDENT: (i64, i64) = (300, 340);
const PPO_STEP_US: i64 = 20 * SEC;

const LANDER_STEPS: i64 = 120;
const LANDER_STEP_US: i64 = 30 * SEC;
/// Hours after the demo's base time that the preempted run starts.
const LANDER_START_H: i64 = 5;

/// How a rollout ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    Ok,
    /// The physics step produces NaN; the error climbs to the root.
    Diverged,
    /// An env worker stops answering.
    Timeout,
    /// Preempted mid-step: the root, an env step and a policy call stay open.
    Cut,
}

/// The return's multiplier: 1, except for a dip across the incident and a slow recovery.
fn dip(step: i64) -> f64 {
    let (from, to) = INCIDENT;
    if step < from {
        1.0
    } else if step < from + 4 {
        1.0 - 0.65 * (step - from + 1) as f64 / 4.0
    } else if step <= to {
        0.35
    } else if step <= to + 30 {
        0.35 + 0.65 * (step - to) as f64 / 30.0
    } else {
        1.0
    }
}

struct PpoPoint {
    episode_return: f64,
    policy_loss: f64,
    entropy: f64,
}

fn ppo_point(step: i64) -> PpoPoint {
    let mut r = Rng::new(&format!("{PPO_RUN}/metrics/{step}"));
    let s = step as f64;
    let d = dip(step);
    let trend = 22.0 + 440.0 * s / (s + 130.0);
    PpoPoint {
        episode_return: round((trend * d * (1.0 + 0.04 * r.noise())).max(9.0), 2),
        policy_loss: round(
            0.06 * 130.0 / (s + 130.0) * (1.0 + 0.15 * r.noise()) + (1.0 - d) * 0.12,
            4,
        ),
        entropy: round(
            0.15 + 0.54 * 160.0 / (s + 160.0) + (1.0 - d) * 0.25 + 0.008 * r.noise(),
            4,
        ),
    }
}

fn ppo_ending(step: i64) -> Ending {
    if (INCIDENT.0..=INCIDENT.1).contains(&step) {
        Ending::Diverged
    } else if step == 148 {
        Ending::Timeout
    } else {
        Ending::Ok
    }
}

/// Rollouts are traced every 4 steps, and every step from the first failure until
/// three steps after the last, as a loop that samples more while things go wrong would.
fn ppo_traced(step: i64) -> bool {
    step % 4 == 0 || (INCIDENT.0..=INCIDENT.1 + 3).contains(&step)
}

pub(super) fn ppo(ctx: &Ctx) -> RunPlan {
    let start = ctx.base;
    let metrics = (0..PPO_STEPS)
        .flat_map(|step| {
            let p = ppo_point(step);
            let ts = start + step * PPO_STEP_US + 15 * SEC;
            [
                ("train/episode_return", p.episode_return),
                ("train/policy_loss", p.policy_loss),
                ("train/entropy", p.entropy),
            ]
            .map(|(key, value)| MetricPoint {
                key: key.into(),
                step,
                value,
                ts: Some(ts),
            })
        })
        .collect();
    RunPlan {
        run_id: PPO_RUN,
        upsert: RunUpsert {
            project: PROJECT.into(),
            name: Some("ppo-cartpole".into()),
            config: Some(
                json!({"algorithm": "PPO", "env": "CartPole-v1", "total_steps": PPO_STEPS,
                "n_envs": 4, "n_steps": 128, "lr": 0.0003, "gamma": 0.99, "gae_lambda": 0.95,
                "clip_range": 0.2, "ent_coef": 0.01, "seed": 42}),
            ),
            start_us: Some(start),
        },
        metrics,
        notes: Vec::new(),
        events: Box::new(move || -> Chunks {
            Box::new((0..PPO_STEPS).flat_map(move |step| {
                let t0 = start + step * PPO_STEP_US + SEC;
                let mut chunk = Vec::new();
                if ppo_traced(step) {
                    let env = Env::cartpole();
                    let ret = ppo_point(step).episode_return;
                    chunk.extend(rollout(PPO_RUN, &env, step, t0, ret, ppo_ending(step)));
                }
                if step > 0 && step % 100 == 0 {
                    chunk.extend(checkpoint(PPO_RUN, step, t0 + 10 * SEC, false));
                }
                (!chunk.is_empty()).then_some(chunk)
            }))
        }),
        finish: Some(RunFinish {
            status: RunStatus::Finished,
            end_us: Some(start + PPO_STEPS * PPO_STEP_US),
        }),
    }
}

pub(super) fn interrupted(ctx: &Ctx) -> RunPlan {
    let start = ctx.base + LANDER_START_H * super::trace::HOUR;
    let metric = |step: i64| {
        let mut r = Rng::new(&format!("{INTERRUPTED_RUN}/metrics/{step}"));
        let s = step as f64;
        round(-180.0 + 330.0 * s / (s + 70.0) + 12.0 * r.noise(), 2)
    };
    let metrics = (0..LANDER_STEPS)
        .map(|step| MetricPoint {
            key: "train/episode_return".into(),
            step,
            value: metric(step),
            ts: Some(start + step * LANDER_STEP_US + 20 * SEC),
        })
        .collect();
    RunPlan {
        run_id: INTERRUPTED_RUN,
        upsert: RunUpsert {
            project: PROJECT.into(),
            name: Some("ppo-lunarlander-preempted".into()),
            config: Some(
                json!({"algorithm": "PPO", "env": "LunarLander-v3", "total_steps": 1000,
                "n_envs": 8, "lr": 0.00025, "gamma": 0.999, "seed": 3, "preemptible": true}),
            ),
            start_us: Some(start),
        },
        metrics,
        notes: Vec::new(),
        events: Box::new(move || -> Chunks {
            Box::new((0..=LANDER_STEPS).step_by(4).map(move |step| {
                let t0 = start + step * LANDER_STEP_US + SEC;
                let env = Env::lander();
                if step < LANDER_STEPS {
                    return rollout(INTERRUPTED_RUN, &env, step, t0, metric(step), Ending::Ok);
                }
                // The node was preempted here: a rollout and a checkpoint upload in flight.
                let mut chunk = rollout(INTERRUPTED_RUN, &env, step, t0, 0.0, Ending::Cut);
                chunk.extend(checkpoint(INTERRUPTED_RUN, step, t0 + 2 * SEC, true));
                chunk
            }))
        }),
        // Finishing while spans are open: the server marks them interrupted.
        finish: Some(RunFinish {
            status: RunStatus::Failed,
            end_us: Some(start + LANDER_STEPS * LANDER_STEP_US + 45 * SEC),
        }),
    }
}

struct Env {
    name: &'static str,
    prefix: &'static str,
    obs_len: usize,
    /// Reward per env step, before noise.
    reward: f64,
}

impl Env {
    fn cartpole() -> Env {
        Env {
            name: "CartPole-v1",
            prefix: "cartpole",
            obs_len: 4,
            reward: 1.0,
        }
    }

    fn lander() -> Env {
        Env {
            name: "LunarLander-v3",
            prefix: "lander",
            obs_len: 8,
            reward: 0.0,
        }
    }
}

fn obs(r: &mut Rng, len: usize, scale: f64) -> Value {
    json!((0..len)
        .map(|_| round(scale * (r.f64() - 0.5), 3))
        .collect::<Vec<f64>>())
}

/// One traced episode: a rollout root with env steps, each holding the policy call,
/// the physics step and the reward. The root's close carries the `episode_return`
/// attribute (none when `Cut` leaves the root open).
fn rollout(run: &str, env: &Env, step: i64, t0: i64, ret: f64, ending: Ending) -> Vec<Value> {
    let label = format!("{run}/rollout/{step}");
    let mut w = TraceWriter::new(&label);
    let mut r = Rng::new(&label);
    let worker = step % 4;
    let root = w.open(
        None,
        "rollout",
        &format!("rollout step {step}"),
        t0,
        json!({"step": step, "rank": worker, "thread_id": format!("env-worker-{worker}"),
            "attributes": {"env": env.name, "rollout_id": format!("{}-{step:04}", env.prefix),
                "seed": 1000 + step, "policy_version": step},
            "input": {"env": env.name, "seed": 1000 + step, "max_episode_steps": 500}}),
    );
    let horizon = r.range(8, 14);
    let stop_at = match ending {
        Ending::Ok => None,
        _ => Some(r.range(2, horizon - 2)),
    };
    let mut ts = t0 + 3 * MS;
    let mut state = obs(&mut r, env.obs_len, 0.1);
    let mut total = 0.0;
    for t in 0..horizon {
        let stopping = stop_at == Some(t);
        let env_step = w.open(
            Some(&root),
            "env_step",
            &format!("env.step t={t}"),
            ts,
            json!({"input": {"t": t, "obs": state}}),
        );
        if stopping && ending == Ending::Timeout {
            let e = error(
                "TimeoutError",
                &format!("env worker {worker} did not answer within 5 s"),
            );
            w.close(
                &env_step,
                ts + 5 * SEC,
                "error",
                json!({ "error": e.clone() }),
            );
            // The episode's return is what it had earned when the worker stopped.
            let out = json!({"return": round(total, 2), "length": t});
            w.close(
                &root,
                ts + 5 * SEC + MS,
                "error",
                json!({"error": e, "output": out,
                    "attributes": {"episode_return": round(total, 2)}}),
            );
            return w.take();
        }
        let policy_start = ts + 40;
        let policy_end = policy_start + 600 + r.below(500) as i64;
        let p_left = round(0.5 + 0.45 * (r.f64() - 0.5), 3);
        let action = i64::from(r.f64() >= p_left);
        let model_open = json!({"input": {"obs": state},
            "attributes": {"policy": "mlp-64x64", "device": "cuda:0", "policy_version": step}});
        if stopping && ending == Ending::Cut {
            w.open(
                Some(&env_step),
                "model",
                "policy.forward",
                policy_start,
                model_open,
            );
            return w.take();
        }
        w.leaf(
            &env_step,
            "model",
            "policy.forward",
            policy_start,
            policy_end,
            "ok",
            model_open,
            json!({"output": {"action": action, "action_probs": [p_left, round(1.0 - p_left, 3)],
                "value": round(ret * 0.6 + 5.0 * r.noise(), 2)}}),
        );
        let sim_start = policy_end + 20;
        let sim_end = sim_start + 150 + r.below(100) as i64;
        let sim_input = json!({"input": {"dt": 0.02, "action": action}});
        if stopping && ending == Ending::Diverged {
            let e = error(
                "FloatingPointError",
                &format!("non-finite state after integrate: pole angle is nan at t={t} (dt=0.02)"),
            );
            w.leaf(
                &env_step,
                "function",
                "physics.integrate",
                sim_start,
                sim_end,
                "error",
                sim_input,
                json!({ "error": e.clone() }),
            );
            w.close(&env_step, sim_end + 10, "error", json!({ "error": e }));
            let out = json!({"return": ret, "length": t, "aborted": true});
            w.close(
                &root,
                sim_end + 50,
                "error",
                json!({"output": out, "metrics": {"return": ret},
                    "attributes": {"episode_return": round(ret, 2)},
                    "error": error("EpisodeAborted", &format!("simulator diverged at t={t}; episode aborted"))}),
            );
            return w.take();
        }
        state = obs(&mut r, env.obs_len, 0.2);
        w.leaf(
            &env_step,
            "function",
            "physics.integrate",
            sim_start,
            sim_end,
            "ok",
            sim_input,
            json!({"output": {"obs": state}}),
        );
        let reward = if env.reward > 0.0 {
            env.reward
        } else {
            round(3.0 * r.noise(), 3)
        };
        total += reward;
        let reward_end = sim_end + 60;
        w.leaf(
            &env_step,
            "reward",
            "reward",
            sim_end + 10,
            reward_end,
            "ok",
            none(),
            json!({"output": {"reward": reward, "terminated": false}, "metrics": {"reward": reward}}),
        );
        w.close(
            &env_step,
            reward_end + 10,
            "ok",
            json!({"output": {"obs": state, "reward": reward, "done": false}}),
        );
        ts = reward_end + 200;
    }
    w.close(
        &root,
        ts,
        "ok",
        json!({"output": {"return": ret, "length": 500, "traced_env_steps": horizon},
            "metrics": {"return": ret}, "attributes": {"episode_return": round(ret, 2)}}),
    );
    w.take()
}

/// Saving a checkpoint; `cut` leaves it in flight.
fn checkpoint(run: &str, step: i64, t0: i64, cut: bool) -> Vec<Value> {
    let mut w = TraceWriter::new(&format!("{run}/checkpoint/{step}"));
    let root = w.open(
        None,
        "checkpoint",
        &format!("checkpoint step {step}"),
        t0,
        json!({"step": step, "attributes": {"format": "torch", "keep_last": 3}}),
    );
    let file = format!("ckpt-{step:06}.pt");
    let upload_open = json!({"input": {"path": file},
        "attributes": {"bytes": 18_874_368, "storage": "artifact-store"}});
    if cut {
        w.open(
            Some(&root),
            "artifact",
            &format!("upload {file}"),
            t0 + 400 * MS,
            upload_open,
        );
        return w.take();
    }
    w.leaf(
        &root,
        "artifact",
        &format!("upload {file}"),
        t0 + 400 * MS,
        t0 + 2_100 * MS,
        "ok",
        upload_open,
        json!({"output": {"uri": format!("artifacts/{run}/{file}")}}),
    );
    w.close(&root, t0 + 2_200 * MS, "ok", none());
    w.take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_return_dips_where_the_rollouts_fail() {
        let mean = |range: std::ops::Range<i64>| {
            let n = range.end - range.start;
            range.map(|s| ppo_point(s).episode_return).sum::<f64>() / n as f64
        };
        let before = mean(270..300);
        let during = mean(306..340);
        assert!(during < before * 0.5, "{during} vs {before}");
        assert!(mean(470..500) > before);
        for step in INCIDENT.0..=INCIDENT.1 {
            assert!(ppo_traced(step));
            assert!(ppo_ending(step) == Ending::Diverged);
        }
    }

    #[test]
    fn a_rollout_root_carries_its_episode_return() {
        let env = Env::cartpole();
        let root_close = |events: &[Value]| {
            let root = events[0]["span_id"].clone();
            events
                .iter()
                .find(|e| e["op"] == "close" && e["span_id"] == root)
                .cloned()
        };
        for (step, ending) in [(8, Ending::Ok), (INCIDENT.0, Ending::Diverged)] {
            let ret = ppo_point(step).episode_return;
            let events = rollout(PPO_RUN, &env, step, 0, ret, ending);
            let close = root_close(&events).expect("the root closes");
            assert_eq!(close["attributes"]["episode_return"], json!(ret), "{close}");
        }
        let events = rollout(PPO_RUN, &env, 148, 0, 400.0, Ending::Timeout);
        let close = root_close(&events).expect("the root closes");
        assert_eq!(close["status"], "error");
        let earned = &close["attributes"]["episode_return"];
        assert!(
            earned.is_f64() && *earned == close["output"]["return"],
            "{close}"
        );
        let events = rollout(INTERRUPTED_RUN, &Env::lander(), 120, 0, 0.0, Ending::Cut);
        assert!(root_close(&events).is_none());
    }
}
