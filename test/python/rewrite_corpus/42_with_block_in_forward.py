for x, y in loader:
    opt.zero_grad()
    with torch.profiler.record_function("forward"):
        out = net(x)
        text = """a
b"""
    loss = crit(out, y)
    loss.backward()
    opt.step()
