for x, y in loader:
    opt.zero_grad()
    out = net(x)
    loss = sum(
        crit(o, t)
        for o, t in zip(out.split(8), y.split(8))
    ) / (n := len(out.split(8)))
    loss.backward()
    opt.step()
