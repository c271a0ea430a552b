for batch in loader:
    opt.zero_grad()
    inputs = {
        "input_ids": batch["input_ids"],
        "attention_mask": batch["attention_mask"],
    }
    outputs = model(**inputs, labels=batch["labels"])
    loss = outputs.loss
    loss.backward()
    opt.step()
