import jax, jax.numpy as jnp
import hlofuse

def layer_norm(x, gamma, beta):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gamma + beta

def row_stats(x):
    m = x.mean(-1)
    c = x - m[:, None]
    return (c ** 2).mean(-1), x.max(-1)

if __name__ == "__main__":
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in [(256, 768), (768,), (768,)]]
    for name, fn, a in [("ln", layer_norm, args), ("rs", row_stats, args[:1])]:
        for tag, flags in [("default", None), ("noreduce", "--xla_cpu_experimental_ynn_fusion_type=INDIVIDUAL_DOT,INDIVIDUAL_CONVOLUTION"), ("minus", "--xla_cpu_experimental_ynn_fusion_type=-REDUCE")]:
            d = hlofuse.compile_jax(fn, *a, backend="cpu", xla_flags=flags, out=f"/tmp/ynncheck/{name}_{tag}")
            print(name, tag, "ok")
