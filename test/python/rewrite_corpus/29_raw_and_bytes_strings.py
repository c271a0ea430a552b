for x, y in loader:
    opt.zero_grad()
    pattern = r'''\d+
    \w+'''
    raw = b'''bytes
  kept'''
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
