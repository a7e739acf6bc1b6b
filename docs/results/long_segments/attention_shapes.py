"""One layer's attention of SmolLM2-135M (9 heads of 64, fp32, 2 threads), forward and backward: a segment of n
tokens after a shared prefix of p under a boolean mask (the tree's masked segment) against the same segment run
causally over its whole path of p + n tokens (the prefix's query rows dropped). Prints milliseconds and the ratio.
    .venv/bin/python docs/results/long_segments/attention_shapes.py"""
import time, torch, torch.nn.functional as F
torch.set_num_threads(2)
def bench(fn, reps=2):
    fn(); t=time.perf_counter()
    for _ in range(reps): fn()
    return (time.perf_counter()-t)/reps
dt=torch.float32
for n in (500, 700, 1000, 1400, 2000):
    for frac in (0.1, 0.2, 0.35, 0.5):
        p=int(n*frac); m=n+p
        qf=torch.randn(1,9,m,64,dtype=dt,requires_grad=True); k=torch.randn(1,9,m,64,dtype=dt,requires_grad=True); v=torch.randn(1,9,m,64,dtype=dt,requires_grad=True)
        mask=torch.ones(n,m,dtype=torch.bool); mask[:, p:]=torch.ones(n,n,dtype=torch.bool).tril()
        g=torch.randn(1,9,n,64,dtype=dt)
        def masked():
            o=F.scaled_dot_product_attention(qf[:,:,p:],k,v,attn_mask=mask); o.backward(g)
        def padded():
            o=F.scaled_dot_product_attention(qf,k,v,is_causal=True)[:,:,p:]; o.backward(g)
        a,b=bench(masked),bench(padded)
        print(n,p,"masked %.1f padded %.1f ratio %.2f"%(a*1e3,b*1e3,a/b), flush=True)
