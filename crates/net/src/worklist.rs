//! The lists of connections a driver goes through each turn (those touched, those with
//! something to write), kept from one turn to the next.

/// `done`, a worklist just gone through, emptied to be the list again, with what was added
/// to the list (`added`) meanwhile: those wait for the next pass, as they would in a fresh
/// list, and the list keeps its buffer instead of allocating a new one each turn.
pub(crate) fn reuse(mut done: Vec<usize>, added: &mut Vec<usize>) -> Vec<usize> {
    done.clear();
    done.append(added);
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_added_meanwhile_is_kept_for_the_next_pass_in_the_old_buffer() {
        let mut done = Vec::with_capacity(16);
        done.extend([1, 2, 3]);
        let buffer = done.as_ptr();
        let mut added = vec![7];
        let list = reuse(done, &mut added);
        assert_eq!(list, [7]);
        assert_eq!(list.as_ptr(), buffer, "the old buffer is the list again");
        assert!(added.is_empty());
    }
}
