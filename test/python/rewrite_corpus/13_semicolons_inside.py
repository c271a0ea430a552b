for x, y in loader:
    opt.zero_grad()
    out = net(x); loss = crit(out, y)
    loss.backward()
    opt.step()
