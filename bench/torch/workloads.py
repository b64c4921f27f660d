"""Three workloads made from code alone: random weights, random data, nothing downloaded.

Each is a class with setup(device) and step(i); step i is the same work for a given seed whichever
allocator runs it. Sizes are keyword arguments (run_one.py --opt key=value).

transformer_train  a GPT-style decoder, one AdamW training step under bf16 autocast per step
cnn_train          a ResNet-50-style CNN, one SGD training step under bf16 autocast per step
serving            a BERT-style encoder with a token-level head under inference_mode, one request per
                   step; request i has a batch and a sequence length drawn log-uniformly from a RNG seeded
                   by (seed, i % period), so the sequence repeats every `period` requests
"""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A pre-norm transformer block: attention through scaled_dot_product_attention, then a GELU MLP."""

    def __init__(self, d_model, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TokenModel(nn.Module):
    """Embeddings, `layers` blocks, a final norm and a head onto the vocabulary."""

    def __init__(self, vocab, d_model, heads, layers, max_seq, causal):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, causal) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class TransformerTrain:
    def __init__(self, seed=0, layers=8, d_model=1024, heads=16, seq=1024, batch=8, vocab=32000, batches=8):
        self.seed, self.layers, self.d_model, self.heads = seed, layers, d_model, heads
        self.seq, self.batch, self.vocab, self.batches = seq, batch, vocab, batches

    def setup(self, device):
        torch.manual_seed(self.seed)
        with torch.device(device):
            self.model = TokenModel(self.vocab, self.d_model, self.heads, self.layers, self.seq, causal=True)
            self.data = [torch.randint(0, self.vocab, (self.batch, self.seq + 1)) for _ in range(self.batches)]
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.1)

    def step(self, i):
        x = self.data[i % len(self.data)]
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = self.model(x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, self.vocab), x[:, 1:].reshape(-1))
        loss.backward()
        self.opt.step()

    def recover(self):
        self.opt.zero_grad(set_to_none=True)


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = 4 * mid
        self.c1, self.b1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.c2, self.b2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.c3, self.b3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = F.relu(self.b1(self.c1(x)), inplace=True)
        out = F.relu(self.b2(self.c2(out)), inplace=True)
        return F.relu(self.b3(self.c3(out)) + identity, inplace=True)


class ResNet(nn.Module):
    def __init__(self, depths=(3, 4, 6, 3), width=64, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for stage, depth in enumerate(depths):
            mid = width * 2 ** stage
            for j in range(depth):
                blocks.append(Bottleneck(cin, mid, 2 if (j == 0 and stage > 0) else 1))
                cin = 4 * mid
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class CnnTrain:
    def __init__(self, seed=0, batch=64, image=224, classes=1000, width=64, channels_last=1, batches=4):
        self.seed, self.batch, self.image, self.classes = seed, batch, image, classes
        self.width, self.channels_last, self.batches = width, bool(channels_last), batches

    def setup(self, device):
        torch.manual_seed(self.seed)
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        with torch.device(device):
            self.model = ResNet(width=self.width, classes=self.classes).to(memory_format=fmt)
            self.data = [(torch.randn(self.batch, 3, self.image, self.image).to(memory_format=fmt),
                          torch.randint(0, self.classes, (self.batch,))) for _ in range(self.batches)]
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def step(self, i):
        x, y = self.data[i % len(self.data)]
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()

    def recover(self):
        self.opt.zero_grad(set_to_none=True)


def log_uniform_int(rng, lo, hi):
    return min(hi, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))


class Serving:
    def __init__(self, seed=0, layers=12, d_model=768, heads=12, vocab=30522, min_batch=1, max_batch=64,
                 min_seq=16, max_seq=512, period=2000):
        self.seed, self.layers, self.d_model, self.heads, self.vocab = seed, layers, d_model, heads, vocab
        self.min_batch, self.max_batch, self.min_seq, self.max_seq = min_batch, max_batch, min_seq, max_seq
        self.period = period

    def request(self, i):
        rng = random.Random(self.seed * 1_000_003 + i % self.period)
        return (log_uniform_int(rng, self.min_batch, self.max_batch),
                log_uniform_int(rng, self.min_seq, self.max_seq))

    def setup(self, device):
        torch.manual_seed(self.seed)
        self.device = device
        with torch.device(device):
            model = TokenModel(self.vocab, self.d_model, self.heads, self.layers, self.max_seq, causal=False)
        self.model = model.to(torch.bfloat16).eval()

    def step(self, i):
        batch, seq = self.request(i)
        with torch.inference_mode():
            ids = torch.randint(0, self.vocab, (batch, seq), device=self.device)
            top = self.model(ids).argmax(-1)
            return top[:, 0].cpu()  # the answer goes back to the host, as a server's does

    def recover(self):
        pass


WORKLOADS = {"transformer_train": TransformerTrain, "cnn_train": CnnTrain, "serving": Serving}


def make(name, seed=0, **opts):
    if name not in WORKLOADS:
        raise SystemExit(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")
    return WORKLOADS[name](seed=seed, **opts)


def parse_opts(items):
    """['batch=4', 'channels_last=0'] -> {'batch': 4, 'channels_last': 0} (numbers where they parse)."""
    opts = {}
    for item in items or []:
        key, _, value = item.partition("=")
        for cast in (int, float):
            try:
                value = cast(value)
                break
            except ValueError:
                pass
        opts[key.strip()] = value
    return opts
