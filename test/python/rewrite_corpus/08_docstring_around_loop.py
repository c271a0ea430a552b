"""Train for one epoch.

    The lines of this docstring are indented
and must stay as they are.
"""
for x, y in loader:
    opt.zero_grad()
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
summary = """done
    training"""
