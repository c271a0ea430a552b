act = lambda t: t.clamp(min=0)
for x, y in loader:
    opt.zero_grad()
    feats = [act(layer(x)) for layer in heads]
    loss = sum(crit(f, y) for f in feats)
    loss.backward()
    opt.step()
