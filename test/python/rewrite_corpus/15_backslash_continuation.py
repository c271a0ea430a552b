for x, y in loader:
    opt.zero_grad()
    out = net(x)
    loss = crit(out, y) \
        + 0.01 * sum(p.pow(2).sum() for p in net.parameters())
    loss.backward()
    opt.step()
